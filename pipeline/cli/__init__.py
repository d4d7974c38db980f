"""The command line: argument parsing and dispatch (main.py), commands, progress lines on stderr."""
