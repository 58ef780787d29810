"""The built-in env types: PushT, ALOHA, Meta-World, and any registered gym id."""
