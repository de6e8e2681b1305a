"""This machine's Quire home (``QUIRE_HOME``): the hubs it joined, their device keys and
pinned keys, the spaces with their vault and store paths, and the credential file.

May import: ``shared`` and the standard library only.
"""
