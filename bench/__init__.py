"""docket's benchmarks: `make bench` (or `python -m bench [--quick]` from the repo root).

Each module compares docket with a baseline in the same run and reports ratios;
nothing here asserts a time. Generated ledgers are cached under bench/.work/.
"""
