"""The vision-language-action family: SmolVLA, π0 and π0.5, as LeRobot 0.6.1 defines them.

A VLA reads camera images, the task text and the robot state with a vision-language model; an
action expert beside it turns noise into a chunk of actions by flow matching. What the members
share is written once, here:

    inputs.py          the batch as a VLA reads it (cameras resized with padding, tokens, state)
    masks.py           who attends to whom: block masks, additive masks, positions, unseen columns
    rotary.py          rotary position tables, in openpi's and in Gemma's arithmetic
    flow_matching.py   training pairs, times, the Euler sampler, the `speed_paths` switch
    rtc.py             real-time chunking: the guidance wrapped around the sampler's velocity
    loading.py         building on the meta device and taking a checkpoint's tensors as they are
    compute_dtype.py   bfloat16 models in float32 where the device emulates bfloat16 (`auto`)
    policy.py          `VLAPolicy`: a flow-matching model as a `PolicyModel`
    tokenizer.py       the processor steps that turn the task (π0.5: and the state) into tokens
    backbones/         a VLM and its action expert run layer by layer: smolvlm.py, paligemma.py

and each model is one file that reads like the model: `smolvla.py`, `pi0.py`, `pi05.py`. Another
VLA is a config class (`rlctl.domain.policies`), a model file here (a `FlowMatching` that embeds
the prefix and the suffix and gives the velocity, a `VLAPolicy` that prepares its inputs and
weighs its loss) and an entry point.

The multi-task DiT lives beside Diffusion Policy (`policies/multi_task_dit.py`: a DiT under
CLIP encoders, no VLM and no action expert) and borrows from here the task's tokenizer step,
Gemma's rotary arithmetic, the flow integrators (Euler, RK4), real-time chunking and the
meta-device loading: a change to those is a change to it too.

Importing this package imports nothing heavy; torch comes with the modules that need it.
"""
