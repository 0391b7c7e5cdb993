"""Authorization: ACLs (acls.py), their records (records.py), and the checks handlers make
(authorize.py)."""
