"""Video adapters: PyAV and torchcodec decoders, one chosen by `auto`, and the PyAV encoder.

Import the module you need; this package imports nothing, so that reading the encoder or PyAV
decoder never pulls in torch through torchcodec.
"""
