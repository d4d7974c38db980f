"""The model adapters' own prompt texts (package data), e.g. the relay prompt of Anthropic's server-side search."""
