"""Model clients: the protocol the steps call (base.py), the Anthropic adapter, and the price table."""
