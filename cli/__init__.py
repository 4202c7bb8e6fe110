"""The command line. :func:`run` is the console script: it imports the CLI itself, so that a Ctrl-C while Python
loads it (half a second or more on a busy machine) is one line too, not a traceback of an import."""


def run() -> None:
    """Console-script entry point (`ddb2bt`)."""
    try:
        from .main import run as main
    except KeyboardInterrupt:
        import sys

        sys.stderr.write("error: interrupted while ddb2bt was starting: nothing was done; run the command again\n")
        raise SystemExit(130) from None
    main()
