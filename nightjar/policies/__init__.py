"""Every module in this package registers one or more policies on import."""
