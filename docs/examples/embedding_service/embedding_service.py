"""A small service that runs rlctl's use cases on request, without rlctl's CLI.

It depends on `rlctl-application` (the use cases) and `rlctl-adapters` (the adapters it wires),
builds its own dependency-injector container with only the providers it needs, and answers:

    GET  /health
    GET  /datasets/info?location=PATH     InspectDataset over the LeRobot v3.0 reader
    POST /evaluations                     EvaluatePolicy in a gymnasium simulator

    python embedding_service.py --port 8080
    curl 'localhost:8080/datasets/info?location=/data/my_dataset'
    curl -X POST localhost:8080/evaluations -d '{"env": {"type": "pusht",
        "obs_type": "environment_state_agent_pos"}, "eval": {"n_episodes": 4}}'

The same operations are plain methods of `EmbeddingService` for callers in the same process.
rlctl's errors come back as JSON `{"error", "where", "hint"}` with a 4xx status.
"""

from __future__ import annotations

import argparse
import importlib
import json
import threading
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import attrs
from dependency_injector import containers, providers

# Importing the registry hooks env configs into rlctl's converter, so `{"type": "pusht"}`
# structures into the right class. Both modules are cheap: simulators load when envs are built.
import rlctl.adapters.sim.registry  # noqa: F401
from rlctl.adapters.sim.config import EnvConfig
from rlctl.adapters.sim.envs.pusht import PushtEnv
from rlctl.domain.config import merge_data, structure, unstructure
from rlctl.domain.errors import ConfigError, DatasetNotFound, InvalidInput, RlctlError
from rlctl.domain.eval_settings import EvalSettings


def lazy(target: str) -> Callable[..., Any]:
    """`"pkg.module:Name"` → a callable that imports on first call, so that building the
    container imports no adapter (the pattern of rlctl's own composition root)."""
    module_name, _, attr = target.partition(":")

    def build(*args: Any, **kwargs: Any) -> Any:
        return getattr(importlib.import_module(module_name), attr)(*args, **kwargs)

    build.__qualname__ = build.__name__ = f"lazy({target})"
    return build


class ServiceContainer(containers.DeclarativeContainer):
    """Which adapter serves which port, for this service only. Tests override a provider:
    `container.meta_reader.override(providers.Object(fake))`."""

    meta_reader = providers.Singleton(
        lazy("rlctl.adapters.storage.lerobot_v3.meta_reader:LeRobotMetaReader")
    )
    inspect_dataset = providers.Factory(
        lazy("rlctl.application.use_cases.inspect_dataset:InspectDataset"),
        meta_reader=meta_reader,
    )

    # A service has no terminal: progress goes nowhere, and no videos are encoded.
    progress = providers.Singleton(lazy("rlctl.adapters.memory.progress:SilentProgress"))
    # Called with an env config: `container.simulation(env_config)`.
    simulation = providers.Factory(lazy("rlctl.adapters.sim.simulation:GymSimulation"))
    policy_loader = providers.Singleton(
        lazy("rlctl.adapters.policies.loaded_policy:LeRobotPolicyLoader")
    )
    # Called with the simulation and the policy: `container.evaluate_policy(sim, policy)`.
    evaluate_policy = providers.Factory(
        lazy("rlctl.application.use_cases.evaluate_policy:EvaluatePolicy"),
        progress=progress,
        video_encoder=None,
    )


def _in_process() -> EvalSettings:
    # Envs in the request thread by default: worker processes take seconds to start.
    return EvalSettings(n_episodes=10, use_async_envs=False, max_episodes_rendered=0)


@attrs.frozen(kw_only=True)
class EvaluationRequest:
    """The body of `POST /evaluations`, structured (and checked) by rlctl's config converter."""

    env: EnvConfig = attrs.field(factory=PushtEnv)
    eval: EvalSettings = attrs.field(factory=_in_process)
    # A `pretrained_model` folder (rlctl's or LeRobot's); none: a random policy acts.
    policy_path: str | None = None
    device: str | None = None


attrs.resolve_types(EvaluationRequest)


class EmbeddingService:
    """The service's operations, each one use case run through the container."""

    def __init__(self, container: ServiceContainer | None = None) -> None:
        self.container = container or ServiceContainer()

    def inspect_dataset(self, location: str) -> dict[str, Any]:
        """fps, features, episodes, frames, tasks, robot type and size of a dataset."""
        return self.container.inspect_dataset()(location).to_dict()

    def evaluate(self, request: dict[str, Any] | EvaluationRequest) -> dict[str, Any]:
        """Roll a policy out in a simulator; LeRobot's `eval_info.json` as a dict."""
        if not isinstance(request, EvaluationRequest):
            # Keys the request leaves out keep this service's defaults (a changed env type
            # starts from that type's defaults).
            data = merge_data(unstructure(EvaluationRequest()), request)
            request = structure(data, EvaluationRequest)
        if request.eval.videos_dir is not None:
            raise InvalidInput("this service records no videos", where="eval.videos_dir")
        simulation = self.container.simulation(request.env)
        policy = self._policy(request, simulation)
        report = self.container.evaluate_policy(simulation, policy)(request.eval)
        return report.to_info()

    def _policy(self, request: EvaluationRequest, simulation: Any) -> Any:
        if request.policy_path:
            return self.container.policy_loader().load(request.policy_path, device=request.device)
        from rlctl.adapters.sim.random_policy import RandomPolicy

        spec = simulation.spec()
        return RandomPolicy(spec.action_low, spec.action_high, seed=request.eval.seed)


# --- HTTP ------------------------------------------------------------------------------------


def status_for(error: RlctlError) -> HTTPStatus:
    if isinstance(error, DatasetNotFound):
        return HTTPStatus.NOT_FOUND
    if isinstance(error, ConfigError | InvalidInput):
        return HTTPStatus.BAD_REQUEST
    return HTTPStatus.UNPROCESSABLE_ENTITY


def make_handler(service: EmbeddingService) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "rlctl-embedding-service/0.1"

        def do_GET(self) -> None:
            url = urlsplit(self.path)
            query = parse_qs(url.query)
            if url.path == "/health":
                self._reply(HTTPStatus.OK, {"status": "ok"})
            elif url.path == "/datasets/info" and query.get("location"):
                self._run(lambda: service.inspect_dataset(query["location"][0]))
            elif url.path == "/datasets/info":
                self._reply(HTTPStatus.BAD_REQUEST, {"error": "give ?location=PATH"})
            else:
                self._reply(HTTPStatus.NOT_FOUND, {"error": f"no route {url.path}"})

        def do_POST(self) -> None:
            if urlsplit(self.path).path != "/evaluations":
                self._reply(HTTPStatus.NOT_FOUND, {"error": f"no route {self.path}"})
                return
            length = int(self.headers.get("Content-Length") or 0)
            try:
                body = json.loads(self.rfile.read(length) or b"{}")
            except json.JSONDecodeError as error:
                self._reply(HTTPStatus.BAD_REQUEST, {"error": f"invalid JSON: {error}"})
                return
            if not isinstance(body, dict):
                self._reply(HTTPStatus.BAD_REQUEST, {"error": "the body must be a JSON object"})
                return
            self._run(lambda: service.evaluate(body))

        def _run(self, operation: Callable[[], dict[str, Any]]) -> None:
            try:
                result = operation()
            except RlctlError as error:
                payload = {"error": error.message, "where": error.where, "hint": error.hint}
                self._reply(status_for(error), payload)
            except Exception as error:  # a bug, not bad input: say so, keep serving
                message = f"unexpected {type(error).__name__}: {error}"
                self._reply(HTTPStatus.INTERNAL_SERVER_ERROR, {"error": message})
            else:
                self._reply(HTTPStatus.OK, result)

        def _reply(self, status: HTTPStatus, payload: dict[str, Any]) -> None:
            data = json.dumps(payload, default=str).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # keep stderr for errors; put an access log here if you want one

    return Handler


def make_server(
    host: str = "127.0.0.1", port: int = 8080, service: EmbeddingService | None = None
) -> ThreadingHTTPServer:
    """A server bound to (host, port); port 0 picks a free one (`server.server_address`)."""
    return ThreadingHTTPServer((host, port), make_handler(service or EmbeddingService()))


def serve_in_background(server: ThreadingHTTPServer) -> threading.Thread:
    thread = threading.Thread(target=server.serve_forever, name="embedding-service", daemon=True)
    thread.start()
    return thread


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="rlctl's use cases over HTTP")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080)
    args = parser.parse_args(argv)
    server = make_server(args.host, args.port)
    print(f"listening on http://{args.host}:{server.server_address[1]}")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
