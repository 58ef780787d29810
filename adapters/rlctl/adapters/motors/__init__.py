"""Motor buses: Feetech and Dynamixel through their SDKs, and a virtual bus they can talk to."""
