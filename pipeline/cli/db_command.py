"""`python -m pipeline db check|upgrade`: the schema of the database RESEARCH_DB names (SQLite file or PostgreSQL).

check: exit 0 when the schema is this program's, 1 when migrations are waiting (or there is no database yet), 2 when
the database cannot be reached or is newer than this program. upgrade: applies the waiting migrations (a second
process doing the same waits, then finds nothing to do); exit 0, or 2 as check.
"""
from __future__ import annotations

import argparse
import sys

from pipeline.cli.commands import EXIT_FAILED, EXIT_OK, EXIT_USAGE
from pipeline.config import Settings
from pipeline.store import store_exists
from pipeline.store.database import check_target, is_postgres, mask, open_database
from pipeline.store.migrations import SCHEMA_VERSION, migrate, schema_version


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `db` on the CLI's subparsers."""
    db = sub.add_parser("db", help="check or upgrade the database schema (RESEARCH_DB)")
    db.add_argument("action", choices=["check", "upgrade"],
                    help="check: is the schema this program's? upgrade: apply the waiting migrations")


def cmd_db(args: argparse.Namespace, settings: Settings) -> int:
    raw = settings.db_path
    check_target(raw)
    kind = "PostgreSQL" if is_postgres(raw) else "SQLite"
    where = f"RESEARCH_DB: {mask(raw)} ({kind})"
    if args.action == "check" and not store_exists(settings):
        print(f"{where}: no database yet; it is created, at schema version {SCHEMA_VERSION}, on first use or by "
              "`python -m pipeline db upgrade`")
        return EXIT_FAILED
    db = open_database(raw)  # a StoreError (unreachable, wrong password) is reported by main, exit 2
    try:
        if args.action == "upgrade":
            before, after = migrate(db)
            change = f"upgraded from schema version {before} to {after}" if before != after else \
                f"already at schema version {after}; nothing to do"
            print(f"{where}: {change}")
            return EXIT_OK
        version = schema_version(db)
    finally:
        db.close()
    if version > SCHEMA_VERSION:
        print(f"{where}: schema version {version} is newer than this program's {SCHEMA_VERSION}; upgrade the "
              "program", file=sys.stderr)
        return EXIT_USAGE
    if version < SCHEMA_VERSION:
        print(f"{where}: schema version {version}; {SCHEMA_VERSION - version} migration(s) waiting: run "
              "`python -m pipeline db upgrade`")
        return EXIT_FAILED
    print(f"{where}: schema version {version}, up to date")
    return EXIT_OK
