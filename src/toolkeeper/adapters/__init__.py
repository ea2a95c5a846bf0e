"""Native tools for agent frameworks, each an optional extra (SPEC §7).

Build them with :func:`toolkeeper.toolbox.build_tools` (``framework=`` one of the names
below); each ``toolkeeper.adapters.<framework>`` module exposes ``build(toolbox, **options)``
over a :class:`toolkeeper.toolbox.Toolbox`, in-process or remote alike.

=================  ===============================================  ==================
framework          install                                          imports
=================  ===============================================  ==================
``pydantic_ai``    ``pip install 'toolkeeper[pydantic-ai]'``        ``pydantic_ai``
``openai_agents``  ``pip install 'toolkeeper[openai-agents]'``      ``agents``
``langchain``      ``pip install 'toolkeeper[langchain]'``          ``langchain_core``,
                                                                    ``langgraph``
``strands``        ``pip install 'toolkeeper-client[strands]'``     ``strands``
=================  ===============================================  ==================

Strands comes only with the client distribution: every ``strands-agents`` release requires
``mcp<2.2`` while the server pins ``mcp==2.3.0``, so it talks to a ``toolkeeper serve``.

The table's home is ``toolkeeper.toolbox.build.FRAMEWORKS``; a missing extra fails with a
:class:`~toolkeeper.errors.UserError` naming the ``pip install`` line above.
"""
