# pyright: strict
"""Who used the GPUs: GPU-hours and cost per team (Slurm account) and per user, from the accounting database.

``sacct`` → :mod:`.sacct` (records) → :mod:`.report` (clipped to the window, priced per partition) → a table,
JSON, or the daily file in the cluster's bucket (:mod:`.cli`). Prices and the bucket come from the accounts
contract (:mod:`.policy`). stdlib only; boto3 for the upload.
"""
