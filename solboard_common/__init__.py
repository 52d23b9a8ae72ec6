"""What the site and the runner nodes share, and nothing else: environment helpers and broker
settings (config), the job protocol (protocol), runner credentials and message signatures
(signing), private files and folders (private_state). No Django, no torch: both sides import it,
so ``runners/`` is only the node: the site imports nothing from it (``solboard runner`` merely
starts it).
"""
