"""`python -m pipeline mcp`: the MCP server over stdio (pipeline/mcp/server.py).

stdout carries the protocol only: logging goes to stderr. The settings and the server's limits are read once, here;
an invalid value stops the server before it serves (exit 2, one line naming the variable).
"""
from __future__ import annotations

import argparse
import logging
import sys

from pipeline.cli.commands import EXIT_OK
from pipeline.config import Settings


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `mcp` on the CLI's subparsers."""
    mcp = sub.add_parser("mcp", help="serve research, fetch_page, search, list_runs, get_run and list_documents "
                                     "to an MCP client over stdio")
    mcp.add_argument("--log-level", choices=["DEBUG", "INFO", "WARNING", "ERROR"], default="INFO",
                     help="what the server logs on stderr (default INFO: one line per run started and finished)")


def cmd_mcp(args: argparse.Namespace, settings: Settings) -> int:
    from pipeline.mcp.limits import McpSettings
    from pipeline.mcp.server import build_server

    limits = McpSettings.from_env()  # ConfigError (exit 2) before serving
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING,
                        format="research mcp: %(levelname)s %(name)s: %(message)s")
    logging.getLogger("pipeline").setLevel(args.log_level)
    server = build_server(settings, limits)
    server.run("stdio")
    return EXIT_OK
