"""Pure data and rules: schema, events, budget ledger, notebook, quote matcher, URL keys, untrusted text. No I/O."""
