"""``python -m bench [all|encode|job|readme] [options]``: rmlprep against its peers, same run.

- ``all`` (the default): the encode table (bench/run.py), the main job (bench/job.py), then the
  README's speed section rewritten from both (bench/report.py);
- ``encode``, ``job``: one of them (their options: ``python -m bench encode --help``);
- ``readme``: rewrite the README section from the latest results.
"""

import sys

from bench import job, report, run

cmd, rest = (sys.argv[1], sys.argv[2:]) if len(sys.argv) > 1 and not sys.argv[1].startswith("-") else ("all", sys.argv[1:])
if cmd == "encode":
    run.main(rest)
elif cmd == "job":
    job.main(rest)
elif cmd == "readme":
    report.write_readme()
elif cmd == "all":
    run.main(rest)
    job.main([])
    report.write_readme()
else:
    raise SystemExit(f"unknown command {cmd!r}: all, encode, job or readme")
