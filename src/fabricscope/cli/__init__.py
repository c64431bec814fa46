"""Command-line shells: parse options, call one library function, render, return an exit code."""
