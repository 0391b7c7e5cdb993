"""Listeners, TLS and SASL: what a connection must show before it is served.

Everything here is loaded only for a server with a listener that needs it: a default
PLAINTEXT server imports none of ssl, cryptography or scramp.
"""
