"""The composition root: the one place that knows which adapter serves which port.

Nothing else composes: no adapter builds a use case, no CLI module builds an adapter (import
contracts in pyproject.toml). A command asks one provider for what it runs (`evaluation`,
`acting_policy`, `policy_serving`, `viewer_server` …); what a provider puts together — which
location is resolved, once, before which adapter reads it — is written here.

Adapters are named by import path and imported when first provided, so building the container
costs nothing and `rlctl --help` never imports torch. Tests override a provider:
`container.meta_reader.override(providers.Object(fake))`.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable, Sequence
from typing import Any

import attrs
from dependency_injector import containers, providers

from rlctl.domain.config import unstructure
from rlctl.entrypoints.settings import AppSettings


def lazy(target: str) -> Callable[..., Any]:
    """`"pkg.module:Name"` → a callable that imports on first call and forwards arguments."""
    module_name, _, attr = target.partition(":")

    def build(*args: Any, **kwargs: Any) -> Any:
        return getattr(importlib.import_module(module_name), attr)(*args, **kwargs)

    build.__qualname__ = build.__name__ = f"lazy({target})"
    build.target = target  # type: ignore[attr-defined]
    return build


def display_kind(config: dict[str, Any]) -> str:
    """`--display_data=true` (on the commands that have it) shows runs through rerun."""
    return "rerun" if config.get("display_data") else "off"


def policy_compute_dtype(config: dict[str, Any]) -> str | None:
    """The command's `--policy.compute_dtype` (None where its settings have none: auto)."""
    policy = config.get("policy")
    return policy.get("compute_dtype") if isinstance(policy, dict) else None


def compose_evaluation(
    env: Any,
    policy: Any,
    *,
    seed: int | None,
    rename_map: dict[str, str],
    resolve_policy: Callable[[], Callable[..., Any]],
    simulation: Callable[[Any], Any],
    choose: Callable[..., Any],
    evaluate: Callable[..., Any],
) -> Any:
    """`rlctl eval`: `EvaluatePolicy` over the env's simulation and the chosen policy. A saved
    policy's `path` (folder, run folder, Hub repo id) is resolved once; each task run beside
    the first gets its own copy of the policy from the same local folder."""
    if policy.path and not policy.server:
        policy = attrs.evolve(policy, path=str(resolve_policy()(policy.path)))
    sim = simulation(env)
    copies = functools.partial(choose, policy, sim, seed=seed)
    return evaluate(sim, copies(), rename_map=rename_map, policy_copies=copies)


def compose_acting_policy(
    settings: Any,
    *,
    resolve_policy: Callable[[], Callable[..., Any]],
    choose: Callable[..., Any],
    inference: Any = None,
    realtime: bool = True,
) -> Any:
    """`rlctl record`'s and `rlctl rollout`'s policy (`choose_acting_policy`): a saved one (its
    `path` resolved once), one on a server, or None; `inference` (rollout): in the tick, or in
    the acting engine's worker; `realtime`: the robot keeps the wall clock's pace (else, a
    simulator, a tick waits for its action)."""
    path = settings.path
    if path and not settings.server:
        path = str(resolve_policy()(path))
    return choose(
        settings, path=path, device=settings.device, inference=inference, realtime=realtime
    )


def compose_policy_serving(
    served: Sequence[Any],
    settings: Any,
    *,
    insecure: bool,
    resolve_policy: Callable[[], Callable[..., Any]],
    read_token: Callable[[str | None], Any],
    server: Callable[..., Any],
    serve: Callable[..., Any],
) -> tuple[Any, list[Any]]:
    """`rlctl policy serve`: `ServePolicy` over a gRPC server set up as the settings say, and
    the policies it serves with their locations resolved (folder, run folder, Hub repo id)."""
    resolve = resolve_policy()
    local = [attrs.evolve(p, location=str(resolve(p.location))) for p in served]
    grpc = server(
        host=settings.host,
        port=settings.port,
        token=read_token(settings.token_file),
        tls_cert=settings.tls_cert,
        tls_key=settings.tls_key,
        insecure=insecure,
        max_message_bytes=int(settings.max_message_mb * (1 << 20)),
        workers=settings.workers,
        max_per_peer=settings.max_per_peer,
        max_connections=settings.max_connections,
        idle_timeout_s=settings.idle_timeout_s,
        message_timeout_s=settings.message_timeout_s,
        handle_signals=True,
    )
    return serve(server=grpc), local


def compose_rl_learning(
    settings: Any,
    *,
    insecure: bool,
    read_token: Callable[[str | None], Any],
    server: Callable[..., Any],
    endpoint: Callable[..., Any],
    trainers: Callable[..., Any],
    trainer_settings: Callable[..., Any],
    demonstrations: Callable[..., Any],
    replay_store: Callable[..., Any],
    clock: Any,
    learn: Callable[..., Any],
) -> Any:
    """`rlctl rl learn`: `LearnWithSAC` over a gRPC endpoint set up as the settings say (the
    policy server's guards), a torch SAC trainer, the demonstrations (if any) and a replay store."""
    grpc = server(
        host=settings.host,
        port=settings.port,
        token=read_token(settings.token_file),
        tls_cert=settings.tls_cert,
        tls_key=settings.tls_key,
        insecure=insecure,
        max_message_bytes=int(settings.max_message_mb * (1 << 20)),
        workers=settings.workers,
        message_timeout_s=settings.message_timeout_s,
        handle_signals=False,
    )
    demos = None
    stats = features = None
    if settings.demonstrations:
        source = demonstrations(settings.demonstrations)
        stats, features = source.stats, source.features
        keys = list(settings.policy.input_features) or None
        demos = source.transitions(keys)
    factory = trainers(
        trainer_settings(
            policy=settings.policy,
            algorithm=settings.algorithm,
            policy_path=settings.policy_path,
            device=settings.device,
            dataset_stats=stats,
            dataset_features=features,
        )
    )
    return learn(
        endpoint=endpoint(grpc),
        trainers=factory,
        replay_store=replay_store(),
        clock=clock,
        demonstrations=demos,
    )


def compose_rl_acting(
    settings: Any,
    robot: Any,
    *,
    read_token: Callable[[str | None], Any],
    link: Callable[..., Any],
    policies: Callable[..., Any],
    interaction: Callable[..., Any],
    reward: Callable[..., Any],
    classifier_reward: Callable[..., Any],
    intervention: Callable[..., Any],
    clock: Any,
    act: Callable[..., Any],
) -> Any:
    """`rlctl rl act`: `ActWithPolicy` over a gRPC link to the learner, on `robot` (its guard
    on every action), with the env's reward (or a reward classifier's success, when
    `reward.classifier_path` names one) and no intervention unless the robot reports one."""
    judge = reward()
    if settings.reward.classifier_path:
        judge = classifier_reward(
            settings.reward.classifier_path,
            threshold=settings.reward.threshold,
            success_reward=settings.reward.success_reward,
            device=settings.device or "cpu",
        )
    return act(
        link=link(
            settings.learner,
            token=read_token(settings.token_file),
            tls_cert=settings.tls_cert,
            max_message_bytes=int(settings.max_message_mb * (1 << 20)),
        ),
        policies=policies(device=settings.device),
        interaction=interaction(robot),
        reward=judge,
        intervention=intervention(),
        clock=clock,
    )


class Container(containers.DeclarativeContainer):
    config = providers.Configuration(strict=True)
    # True only for a command that owns its process (`rlctl train|record|teleoperate|replay`):
    # then the allocator and the interpreter may be tuned for it. Embedded (`rlctl.api`), never.
    owns_process = providers.Object(False)

    meta_reader = providers.Selector(
        config.dataset.store,
        lerobot=providers.Singleton(
            lazy("rlctl.adapters.storage.lerobot_v3.meta_reader:LeRobotMetaReader")
        ),
        memory=providers.Singleton(
            lazy("rlctl.adapters.memory.dataset_store:InMemoryDatasetStore")
        ),
    )

    dataset_writer = providers.Selector(
        config.dataset.store,
        lerobot=providers.Singleton(
            lazy("rlctl.adapters.storage.lerobot_v3.writer:LeRobotV3Writer")
        ),
        memory=providers.Singleton(
            lazy("rlctl.adapters.memory.dataset_writer:InMemoryDatasetWriter")
        ),
    )

    # `rlctl.api.open_dataset`: local LeRobot v3.0 roots as torch Datasets, one or several.
    torch_dataset = providers.Factory(
        lazy("rlctl.adapters.storage.torch_dataset:LeRobotTorchDataset"),
        video_backend=config.dataset.video_backend,
    )
    multi_torch_dataset = providers.Factory(
        lazy("rlctl.adapters.storage.torch_dataset:MultiLeRobotTorchDataset"),
        video_backend=config.dataset.video_backend,
    )
    # `rlctl.api.collate`: the DataLoader's collate_fn for items with language annotations.
    collate_items = providers.Object(lazy("rlctl.adapters.storage.collate:collate_items"))
    # `open_dataset(repo_id, streaming=True)`: a Hub dataset read as it streams.
    streaming_dataset = providers.Factory(
        lazy("rlctl.adapters.storage.streaming.dataset:StreamingLeRobotDataset"),
        video_backend=config.dataset.video_backend,
    )
    streaming_mixture = providers.Factory(
        lazy("rlctl.adapters.storage.streaming.mixture:StreamingMixture"),
        video_backend=config.dataset.video_backend,
    )

    # Logging as the root options say: `container.configure_logging()(level, format)`.
    configure_logging = providers.Object(lazy("rlctl.adapters.telemetry.logging:configure_logging"))

    progress = providers.Selector(
        config.progress,
        auto=providers.Singleton(lazy("rlctl.adapters.telemetry.progress:terminal_progress")),
        terminal=providers.Singleton(lazy("rlctl.adapters.telemetry.progress:RichProgress")),
        silent=providers.Singleton(lazy("rlctl.adapters.memory.progress:SilentProgress")),
    )

    # `--policy.compute_dtype` of the command (unset: auto) applies to every policy it loads.
    policy_loader = providers.Singleton(
        lazy("rlctl.adapters.policies.loaded_policy:LeRobotPolicyLoader"),
        compute_dtype=providers.Callable(policy_compute_dtype, config),
    )
    # A loader with a setting of its own: `rlctl.api.load_policy(..., compute_dtype="keep")`.
    policy_loader_with = providers.Factory(
        lazy("rlctl.adapters.policies.loaded_policy:LeRobotPolicyLoader")
    )
    # `container.eval_policy(EvalPolicySettings, simulation, seed=...)`: saved, or built by type.
    # Policies served by `rlctl policy serve`: `container.policy_connector().connect(settings)`.
    policy_connector = providers.Singleton(
        lazy("rlctl.adapters.remote.remote_policy:GrpcPolicyConnector")
    )
    eval_policy = providers.Factory(
        lazy("rlctl.application.use_cases.choose_policy:choose_policy"),
        policy_loader,
        connector=policy_connector,
    )

    # A simulation is built per env config: `container.simulation(env_config)`.
    simulation = providers.Factory(lazy("rlctl.adapters.sim.simulation:GymSimulation"))

    video_encoder = providers.Singleton(lazy("rlctl.adapters.video.pyav_encoder:PyAVVideoEncoder"))
    video_decoder = providers.Factory(
        lazy("rlctl.adapters.video.auto:video_decoder_for"), config.dataset.video_backend
    )

    # The live display of record / teleoperate / eval: `container.rerun_display(settings=...)`
    # builds one directly (`rlctl dataset view --rerun`).
    rerun_display = providers.Factory(lazy("rlctl.adapters.display.rerun_display:RerunDisplay"))
    live_display = providers.Selector(
        providers.Callable(display_kind, config),
        off=providers.Singleton(lazy("rlctl.adapters.memory.live_display:NoDisplay")),
        rerun=providers.Factory(
            lazy("rlctl.adapters.display.rerun_display:RerunDisplay"), settings=config.display
        ),
    )

    evaluate_policy = providers.Factory(
        lazy("rlctl.application.use_cases.evaluate_policy:EvaluatePolicy"),
        progress=progress,
        video_encoder=video_encoder,
        display=live_display,
    )

    hub = providers.Singleton(lazy("rlctl.adapters.hub.huggingface:HuggingFaceHub"))
    dataset_layout = providers.Singleton(lazy("rlctl.adapters.hub.layout:LeRobotLayout"))
    dataset_integrity = providers.Singleton(lazy("rlctl.adapters.hub.integrity:LeRobotIntegrity"))
    push_dataset = providers.Factory(
        lazy("rlctl.application.use_cases.push_dataset:PushDataset"),
        hub=hub,
        meta_reader=meta_reader,
        layout=dataset_layout,
    )
    pull_dataset = providers.Factory(
        lazy("rlctl.application.use_cases.pull_dataset:PullDataset"),
        hub=hub,
        meta_reader=meta_reader,
        layout=dataset_layout,
        integrity=dataset_integrity,
    )
    resolve_dataset = providers.Factory(
        lazy("rlctl.application.use_cases.pull_dataset:ResolveDataset"), hub=hub, pull=pull_dataset
    )
    push_policy = providers.Factory(
        lazy("rlctl.application.use_cases.push_policy:PushPolicy"), hub=hub
    )
    pull_policy = providers.Factory(
        lazy("rlctl.application.use_cases.pull_policy:PullPolicy"), hub=hub
    )
    resolve_policy = providers.Factory(
        lazy("rlctl.application.use_cases.pull_policy:ResolvePolicy"), pull=pull_policy
    )

    # `rlctl eval`: `container.evaluation(env, policy_settings, seed=..., rename_map=...)`.
    evaluation = providers.Factory(
        compose_evaluation,
        resolve_policy=resolve_policy.provider,
        simulation=simulation.provider,
        choose=eval_policy.provider,
        evaluate=evaluate_policy.provider,
    )
    # `rlctl record`: the policy acting during episodes, `container.acting_policy(settings)`.
    choose_acting_policy = providers.Factory(
        lazy("rlctl.application.use_cases.choose_policy:choose_acting_policy"),
        policy_loader,
        connector=policy_connector,
    )
    acting_policy = providers.Factory(
        compose_acting_policy,
        resolve_policy=resolve_policy.provider,
        choose=choose_acting_policy.provider,
    )
    # `rlctl policy serve`: `use_case, served = container.policy_serving(served, settings, ...)`.
    policy_server = providers.Factory(lazy("rlctl.adapters.remote.grpc_server:GrpcPolicyServer"))
    policy_token = providers.Object(lazy("rlctl.adapters.remote.grpc_server:read_token"))
    serve_policy = providers.Factory(
        lazy("rlctl.application.use_cases.serve_policy:ServePolicy"), policy_loader
    )
    policy_serving = providers.Factory(
        compose_policy_serving,
        resolve_policy=resolve_policy.provider,
        read_token=policy_token,
        server=policy_server.provider,
        serve=serve_policy.provider,
    )
    # The policy config a checkpoint folder holds, as plain data (`rlctl train --policy.path`
    # layers it under the command line), and the check that it structures.
    policy_config_data = providers.Object(
        lazy("rlctl.adapters.policies.config_file:read_config_data")
    )
    policy_config_check = providers.Object(
        lazy("rlctl.adapters.policies.config_file:structure_config")
    )

    language_annotations = providers.Selector(
        config.dataset.store,
        lerobot=providers.Singleton(
            lazy("rlctl.adapters.storage.lerobot_v3.language_summary:LeRobotLanguageSummary")
        ),
        memory=providers.Object(None),
    )
    inspect_dataset = providers.Factory(
        lazy("rlctl.application.use_cases.inspect_dataset:InspectDataset"),
        meta_reader=meta_reader,
        language=language_annotations,
    )

    # The dataset viewer: `container.view_dataset()(location)` → the page's data.
    episode_data = providers.Selector(
        config.dataset.store,
        lerobot=providers.Singleton(
            lazy("rlctl.adapters.storage.lerobot_v3.episode_data:LeRobotEpisodeData")
        ),
        memory=providers.Singleton(
            lazy("rlctl.adapters.memory.episode_data:InMemoryEpisodeData"), writer=dataset_writer
        ),
    )
    view_dataset = providers.Factory(
        lazy("rlctl.application.use_cases.view_dataset:ViewDataset"),
        meta_reader=meta_reader,
        episode_data=episode_data,
    )
    # `container.display_episode(display=...)(location, episode)`: an episode replayed to a display.
    display_episode = providers.Factory(
        lazy("rlctl.application.use_cases.display_episode:DisplayEpisode"),
        view=view_dataset,
        decoder=video_decoder,
    )
    # `rlctl dataset view`: the page served (`viewer_server(viewer, host=, port=,
    # allow_remote=)`), written as files (`viewer_site(viewer, out)`), and the refusal of a
    # host other machines reach (`refuse_remote_viewer(host)`).
    viewer_server = providers.Factory(lazy("rlctl.adapters.viewer.server:ViewerServer"))
    viewer_site = providers.Object(lazy("rlctl.adapters.viewer.site:write_site"))
    refuse_remote_viewer = providers.Object(lazy("rlctl.adapters.viewer.server:refuse_remote"))
    # Reports of runs: `container.report_run()(run_dir)`.
    run_folder = providers.Singleton(lazy("rlctl.adapters.reports.run_folder:LocalRunFolder"))
    report_renderer = providers.Singleton(
        lazy("rlctl.adapters.reports.renderer:HtmlReportRenderer")
    )
    report_run = providers.Factory(
        lazy("rlctl.application.use_cases.report_run:ReportRun"),
        reader=run_folder,
        renderer=report_renderer,
    )

    # Robots, teleoperators and recording: devices are built per config,
    # `container.robot(robot_config)`; use cases take them at call time.
    clock = providers.Singleton(lazy("rlctl.adapters.clock.system:SystemClock"))
    # `container.refreshing_report(metrics, run_dir, every_s=60)`: the report kept fresh.
    refreshing_report = providers.Factory(
        lazy("rlctl.application.use_cases.report_while_training:RefreshingReport"),
        write_report=report_run,
        clock=clock,
    )
    calibration_store = providers.Singleton(
        lazy("rlctl.adapters.robots.calibration_files:CalibrationFiles")
    )
    robot = providers.Factory(
        lazy("rlctl.adapters.robots.config:make_robot"), calibration_store=calibration_store
    )
    # `rlctl lekiwi-host`: a LeKiwi served to a client over ZeroMQ.
    lekiwi_host = providers.Factory(lazy("rlctl.adapters.robots.lekiwi_host:LeKiwiHost"))
    teleoperator = providers.Factory(
        lazy("rlctl.adapters.teleop.config:make_teleoperator"),
        calibration_store=calibration_store,
    )
    record_controls = providers.Factory(lazy("rlctl.adapters.control.terminal:keyboard_controls"))
    console = providers.Singleton(lazy("rlctl.adapters.control.terminal:TerminalConsole"))
    episode_actions = providers.Singleton(
        lazy("rlctl.adapters.storage.lerobot_v3.episode_actions:LeRobotEpisodeActions")
    )
    calibrate_robot = providers.Factory(
        lazy("rlctl.application.use_cases.calibrate_robot:CalibrateRobot"),
        store=calibration_store,
        console=console,
        clock=clock,
    )
    setup_motors = providers.Factory(
        lazy("rlctl.application.use_cases.setup_motors:SetupMotors"), console=console
    )
    serial_ports = providers.Object(lazy("rlctl.adapters.robots.serial_ports:list_serial_ports"))
    find_port = providers.Factory(
        lazy("rlctl.application.use_cases.setup_motors:FindPort"), serial_ports, console
    )
    # `rlctl setup-can`: CAN links brought up, Damiao motors found and timed on them.
    can_setup = providers.Factory(lazy("rlctl.adapters.motors.can_setup:CanSetup"), console)
    # `rlctl find-cameras`: the cameras of every kind, and an OpenCV one opened by its config.
    find_cameras = providers.Object(lazy("rlctl.adapters.cameras.discovery:find_all"))
    opencv_camera = providers.Factory(lazy("rlctl.adapters.cameras.opencv:OpenCVCamera"))
    # Ctrl-C and SIGTERM during a recording: the episode under way and the dataset's closing
    # are saved however often the signal comes (uv forwards each Ctrl-C twice).
    recording_interrupts = providers.Factory(
        lazy("rlctl.adapters.control.stop_signals:StopSignals"),
        what="the recording",
        kept="every episode saved before is kept",
    )
    record_episodes = providers.Factory(
        lazy("rlctl.application.use_cases.record_episodes:RecordEpisodes"),
        writer=dataset_writer,
        clock=clock,
        progress=progress,
        owns_process=owns_process,
        display=live_display,
        interrupts=recording_interrupts,
    )
    # `rlctl rollout`: each strategy's keys (or DAgger's pedal), `rollout_controls(strategy)`.
    rollout_controls = providers.Factory(
        lazy("rlctl.adapters.control.rollout_keys:rollout_controls")
    )
    rollout_interrupts = providers.Factory(
        lazy("rlctl.adapters.control.stop_signals:StopSignals"),
        what="the rollout's recording",
        kept="every episode saved before is kept",
    )
    run_rollout = providers.Factory(
        lazy("rlctl.application.use_cases.run_rollout:RunRollout"),
        writer=dataset_writer,
        clock=clock,
        progress=progress,
        owns_process=owns_process,
        display=live_display,
        interrupts=rollout_interrupts,
    )
    teleoperate_robot = providers.Factory(
        lazy("rlctl.application.use_cases.teleoperate_robot:TeleoperateRobot"),
        clock=clock,
        progress=progress,
        owns_process=owns_process,
        display=live_display,
    )
    replay_episode = providers.Factory(
        lazy("rlctl.application.use_cases.replay_episode:ReplayEpisode"),
        episodes=episode_actions,
        clock=clock,
        progress=progress,
        owns_process=owns_process,
    )

    # Dataset tools: check, merge, split, delete-episodes, recompute-stats, convert, and the
    # feature, task and video edits.
    dataset_checker = providers.Singleton(
        lazy("rlctl.adapters.storage.lerobot_v3.tools.checker:LeRobotDatasetChecker")
    )
    dataset_rebuilder = providers.Singleton(
        lazy("rlctl.adapters.storage.lerobot_v3.tools.rebuild:LeRobotRebuilder")
    )
    dataset_folders = providers.Singleton(
        lazy("rlctl.adapters.storage.lerobot_v3.tools.folders:LocalDatasetFolders")
    )
    dataset_stats_access = providers.Factory(
        lazy("rlctl.adapters.storage.lerobot_v3.tools.stats_access:LeRobotStatsAccess")
    )
    legacy_dataset_reader = providers.Singleton(
        lazy("rlctl.adapters.storage.lerobot_v21.source:LeRobotV21Reader")
    )
    check_dataset = providers.Factory(
        lazy("rlctl.application.use_cases.check_dataset:CheckDataset"),
        checker=dataset_checker,
        progress=progress,
    )
    merge_datasets = providers.Factory(
        lazy("rlctl.application.use_cases.merge_datasets:MergeDatasets"),
        meta_reader=meta_reader,
        rebuilder=dataset_rebuilder,
        folders=dataset_folders,
        progress=progress,
    )
    split_dataset = providers.Factory(
        lazy("rlctl.application.use_cases.split_dataset:SplitDataset"),
        meta_reader=meta_reader,
        rebuilder=dataset_rebuilder,
        folders=dataset_folders,
        progress=progress,
    )
    delete_episodes = providers.Factory(
        lazy("rlctl.application.use_cases.delete_episodes:DeleteEpisodes"),
        meta_reader=meta_reader,
        rebuilder=dataset_rebuilder,
        folders=dataset_folders,
        progress=progress,
    )
    remove_features = providers.Factory(
        lazy("rlctl.application.use_cases.edit_features:RemoveFeatures"),
        meta_reader=meta_reader,
        rebuilder=dataset_rebuilder,
        folders=dataset_folders,
        progress=progress,
    )
    add_features = providers.Factory(
        lazy("rlctl.application.use_cases.edit_features:AddFeatures"),
        meta_reader=meta_reader,
        rebuilder=dataset_rebuilder,
        folders=dataset_folders,
        progress=progress,
    )
    modify_tasks = providers.Factory(
        lazy("rlctl.application.use_cases.modify_tasks:ModifyTasks"),
        meta_reader=meta_reader,
        rebuilder=dataset_rebuilder,
        folders=dataset_folders,
        progress=progress,
    )
    convert_images_to_video = providers.Factory(
        lazy("rlctl.application.use_cases.encode_videos:ConvertImagesToVideo"),
        meta_reader=meta_reader,
        rebuilder=dataset_rebuilder,
        folders=dataset_folders,
        progress=progress,
    )
    reencode_videos = providers.Factory(
        lazy("rlctl.application.use_cases.encode_videos:ReencodeVideos"),
        meta_reader=meta_reader,
        rebuilder=dataset_rebuilder,
        folders=dataset_folders,
        progress=progress,
    )
    crop_dataset_roi = providers.Factory(
        lazy("rlctl.application.use_cases.crop_roi:CropDatasetRoi"),
        meta_reader=meta_reader,
        rebuilder=dataset_rebuilder,
        folders=dataset_folders,
        progress=progress,
    )
    recompute_stats = providers.Factory(
        lazy("rlctl.application.use_cases.recompute_stats:RecomputeStats"),
        meta_reader=meta_reader,
        stats_access=dataset_stats_access,
        progress=progress,
    )
    # `rlctl train-tokenizer`: FAST's DCT + BPE fitted on a dataset's action chunks.
    action_tokenizer_fitter = providers.Factory(lazy("rlctl.adapters.policies.vla.fast:FASTFitter"))
    train_action_tokenizer = providers.Factory(
        lazy("rlctl.application.use_cases.train_action_tokenizer:TrainActionTokenizer"),
        meta_reader=meta_reader,
        stats_access=dataset_stats_access,
        fitter=action_tokenizer_fitter,
        hub=hub,
    )
    convert_dataset = providers.Factory(
        lazy("rlctl.application.use_cases.convert_dataset:ConvertDataset"),
        legacy_reader=legacy_dataset_reader,
        rebuilder=dataset_rebuilder,
        folders=dataset_folders,
        progress=progress,
    )

    # Training: `container.train_policy(metrics=..., evaluator=...)`.
    training_backend = providers.Factory(
        lazy("rlctl.adapters.training.backend:TorchTrainingBackend"),
        video_backend=config.dataset.video_backend,
        keep_freed_memory=owns_process,
    )
    training_metrics = providers.Factory(
        lazy("rlctl.adapters.telemetry.metrics:training_metrics_sink")
    )
    # `container.training_evaluator(simulation)`: evaluations during training, in that simulation.
    training_evaluator = providers.Factory(
        lazy("rlctl.application.use_cases.train_policy:SimulationEvaluator"),
        evaluate=evaluate_policy.provider,
    )
    # Hub datasets read as they stream: only their meta/ is fetched.
    streamed_datasets = providers.Selector(
        config.dataset.store,
        lerobot=providers.Singleton(
            lazy("rlctl.adapters.storage.streaming.source:HubStreamedDatasets")
        ),
        memory=meta_reader,
    )
    # What a run trains with, decided once (dataset and pretrained checkpoint resolved here).
    plan_training = providers.Factory(
        lazy("rlctl.application.use_cases.train_plan:PlanTraining"),
        resolve_dataset=resolve_dataset,
        streams=streamed_datasets,
        meta_reader=meta_reader,
        resolve_policy=resolve_policy,
        policies=policy_loader,
        columns=dataset_stats_access,
    )
    train_policy = providers.Factory(
        lazy("rlctl.application.use_cases.train_policy:TrainPolicy"),
        backend=training_backend,
        progress=progress,
        plan=plan_training,
    )

    # `rlctl rl learn` / `rlctl rl act` (HIL-SERL): `container.rl_learning(settings, insecure=)`,
    # `container.rl_acting(settings, container.robot(robot_config))`.
    rl_learning = providers.Factory(
        compose_rl_learning,
        read_token=policy_token,
        server=policy_server.provider,
        endpoint=providers.Object(lazy("rlctl.adapters.remote.rl_grpc:GrpcLearnerEndpoint")),
        trainers=providers.Object(lazy("rlctl.adapters.rl.trainer:TorchSACTrainerFactory")),
        trainer_settings=providers.Object(lazy("rlctl.adapters.rl.trainer:TrainerSettings")),
        demonstrations=providers.Object(lazy("rlctl.adapters.rl.demonstrations:Demonstrations")),
        replay_store=providers.Object(lazy("rlctl.adapters.rl.trainer:SafetensorsReplayStore")),
        clock=clock,
        learn=providers.Object(lazy("rlctl.application.use_cases.rl_learn:LearnWithSAC")),
    )
    rl_acting = providers.Factory(
        compose_rl_acting,
        read_token=policy_token,
        link=providers.Object(lazy("rlctl.adapters.remote.rl_grpc:GrpcLearnerLink")),
        policies=providers.Object(lazy("rlctl.adapters.rl.acting:GaussianActingPolicyFactory")),
        interaction=providers.Object(lazy("rlctl.adapters.rl.acting:RobotInteraction")),
        reward=providers.Object(lazy("rlctl.adapters.rl.reward:EnvReward")),
        classifier_reward=providers.Object(lazy("rlctl.adapters.rl.reward:classifier_reward")),
        intervention=providers.Object(lazy("rlctl.adapters.rl.reward:NoIntervention")),
        clock=clock,
        act=providers.Object(lazy("rlctl.application.use_cases.rl_act:ActWithPolicy")),
    )


def build_container(
    settings: AppSettings | None = None, *, owns_process: bool = False
) -> Container:
    """`owns_process`: for the commands that own their process (see `Container.owns_process`)."""
    container = Container(owns_process=providers.Object(owns_process))
    # Every command's settings over the shared defaults: a command whose settings lack a
    # section the container reads (train's dataset has no `store`) gets the default adapter.
    container.config.from_dict(unstructure(AppSettings()))
    if settings is not None:
        container.config.from_dict(unstructure(settings))
    return container
