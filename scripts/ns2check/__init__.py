"""Common code of `scripts/ns2-check`: the same 802.11 scenario written for
ns-2 (a generated Tcl script, run by `ns` in a temporary directory, its
trace parsed) and for rtolab (a scenario file), and what both MACs and TCPs
did, measured the same way (docs/wifi.md, "ns-2 against rtolab")."""
