"""Rendering: terminal (rich), JSON documents and HTML. No domain logic here."""
