"""Who may search what: API keys, access grants, identities and the scope rule (kernel < sources < access)."""
