"""The VLA family's backbones: a pretrained vision-language model and an action expert beside it,
run layer by layer together (`transformers`' modules, LeRobot's parameter names).

    smolvlm.py          SmolVLM and a narrower copy of its text model (SmolVLA)
    paligemma.py        PaliGemma and a Gemma expert, whose norms may read the time (π0, π0.5)
    vlm_with_expert.py  what both keep frozen in training
"""
