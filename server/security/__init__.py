"""Security: listeners, TLS and SASL (what a connection must show before it is served), and
authorization: ACLs (acls.py), their records (records.py), and the checks handlers make
(authorize.py).

The listener and SASL parts load only for a server with a listener that needs them: a default
PLAINTEXT server imports none of ssl, cryptography or the SASL mechanisms.
"""
