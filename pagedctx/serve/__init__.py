"""`pagedctx serve`: an OpenAI-compatible chat endpoint whose context is paged by PCP (D2, P13).

- `settings.py`: what a server runs with (profile `serve:` section, environment, flags);
- `openai_types.py`: the OpenAI chat shapes we read, the `openai` types we answer with, the error shape;
- `history.py`: which of the messages a client sent the session already holds;
- `guard.py`: the token reader and bearer guard both servers use, tokens -> tenants, the rate limit;
- `service.py`: the chat service on `pagedctx.Session` (no web framework in it);
- `app.py`: the FastAPI app (routes, SSE streaming, errors in the OpenAI shape);
- `deployment.py`: the app as a Ray Serve deployment, and `serve_forever` for the CLI.
"""
