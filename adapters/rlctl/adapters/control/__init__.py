"""A person at the terminal: recording controls from the keyboard or stdin, and prompts."""
