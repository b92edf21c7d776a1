"""The unified tool interface: definitions, registry, and the executor every call goes through."""
