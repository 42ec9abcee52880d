"""The review page: a local web edge over `gate.review`, served by `gate review serve`.

What it holds: the desk (`desk.py`: who sees which item next, and each act a reviewer or an
adjudicator makes, appended to the ledger; no HTTP), the one ASGI app (`app.py`: thin views, the
JSON API the page is a client of, and the guards every request passes), the server's start
(`serve.py`), and the page's Jinja2 templates and static CSS and JavaScript (no build step).
What it may import: `gate.model` and `gate.review`; starlette, uvicorn and jinja2 only once the
page is served (nothing else in the gate loads them).
"""
