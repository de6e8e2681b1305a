"""The test kit: every helper the suite shares, one home per name.

    host           the checkout's path (REPO), free ports, temporary folders, a pty,
                   ``unavailable`` (skip on a developer's machine, fail under CI), and
                   ``as_anyone``/``code_for_anyone``: a child run as another user (uid
                   65534) that needs nothing from the checkout, wherever the clone lives
    pg             the local PostgreSQL server: ``require_pg``, ``pg_database``
    hubproc        ``init_hub`` (in this process) and ``serve_hub`` (a ``HubProcess`` serving
                   an initialized data folder)
    wire           the hub's wire protocol spoken directly: ``WireMember`` (a device with a
                   real key), ``redeem``, ``put``/``delete``, ``WireTeam`` (owner, editor,
                   viewer on the app in-process)
    cli            the end-to-end tier: ``init_and_serve_hub`` (a ``FreshHub``), ``CliTeam``,
                   ``CliMember`` (a machine joined with the real CLI), ``quire``/``qjson``;
                   fixtures ``hub``, ``owner``, ``team``
    inproc         replicas against the real hub app in-process: ``InprocHub``, ``Space``,
                   ``Local``; fixtures ``inproc_hub``, ``space``
    hostile        a transport that makes the real hub lie (rolled-back heads, bad signatures)
    hostile_proxy  the same lies as an HTTP proxy in front of a real hub process
    watcher        ``quire watch`` subprocesses (``WatchProc``) and ``wait_for``
    sse            a reader of the hub's event stream
    editor         a person at a vault saving in every editor style (``Person``) and the
                   ledger the save-race fuzzes' oracle checks (``Ledger``, ``tokens``)

Fixtures live in the kit module of their tier; a folder's ``conftest.py`` imports the ones
its tests use (a conftest's fixtures apply to its folder and below).
"""
