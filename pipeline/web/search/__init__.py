"""Search: the provider protocol (base.py), the registry of providers, the budgeted service, one file per provider."""
