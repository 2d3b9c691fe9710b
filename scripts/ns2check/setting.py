"""One scenario, written for both simulators.

A wired host (`source`, 100 Mbit/s and 10 ms from the access point) and an
802.11 BSS: the access point (`ap`) and its stations, each either at a
fixed distance or moving along waypoints. Traffic is either one TCP bulk
transfer from the wired source to the first station, or every station
sending saturating UDP to the AP. `tcl()` is the ns-2 script (wired-cum-
wireless: hierarchical addresses, the AP a base station running DSDV,
ns-2's defaults for everything the setting does not name); `toml()` is the
rtolab scenario with the same parameters (the `ns2` presets of the wifi
link and of the TCP host, docs/wifi.md).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

#: Where the AP stands (ns-2's flat grid wants positive coordinates).
AP_X, AP_Y = 10.0, 10.0
#: Sequence numbers of ns-2's TCP count packets of this many bytes.
PACKET = 1000
#: The wired hop of the study's topology (timelost spec §3).
WIRED_RATE, WIRED_DELAY_MS, WIRED_QUEUE = "100Mb", 10, 100
#: UDP payload and rate of a saturated station (well above 1 Mbit/s).
CBR_SIZE, CBR_RATE = 1000, "2Mb"
#: ns-2's DSDV agent adds an IP header (`IP_HDR_LEN`, 20 bytes) to every
#: packet its own node originates (`DSDV_Agent::recv`, `dsdv/dsdv.cc`), so
#: a station's 1000-byte CBR packet is 1020 bytes from the routing layer
#: down; rtolab's stations send datagrams of that size.
STATION_IP_HEADER = 20
#: When each saturating station sends its one early datagram (station i at
#: `PRIME_AT_S + i * PRIME_GAP_S`). ns-2 resolves the AP's address with ARP
#: before a station's first packet and holds one packet meanwhile; twenty
#: stations asking at the same instant broadcast their requests together,
#: the broadcasts collide (no ACK, no retry), and for about ten seconds
#: packets die at the ARP queue. rtolab has no ARP. One datagram each, well
#: apart and before the saturated phase, settles ARP so that phase compares
#: the MACs alone; rtolab's stations send the same datagram.
PRIME_AT_S, PRIME_GAP_S = 1.0, 0.05
#: The TCP source of each sender in ns-2: its agent and the Tcl that picks
#: the congestion control. ns-2.35 has no Westwood+ agent of its own; its
#: TCP-Linux agent runs Linux's `tcp_westwood` (Westwood+). It has no
#: TIBET.
SOURCES = {
    "vegas": ("Agent/TCP/Vegas", ""),
    "reno": ("Agent/TCP/Reno", ""),
    "westwood": ("Agent/TCP/Linux", "$tcp select_ca westwood"),
}
#: The same senders in rtolab, with ns-2's window (initial 2 packets, at
#: most 20 of the `ns2` profile's 1000-byte MSS): `None` keeps the `ns2`
#: profile's Reno, which has it.
#: What ns-2.35's Reno agent does beyond the `ns2` profile (`tcp.cc`,
#: `tcp-reno.cc`): one segment timed at a time (`rtt_active_`), a new
#: segment on each of the first two duplicates (`singledup_ 1`), the timer
#: restarted at a fast retransmit (`reset_rtx_timer`), no fast retransmit
#: for data sent before a timeout (`bugFix_`), and the window grown per ACK
#: (`opencwnd`). docs/ns2-check.md has what each changes.
NS2_RENO = [
    'rto.timing = "one_segment"',
    "limited_transmit = true",
    "fast_retransmit_restarts_timer = true",
    "cc.careful = true",
    "cc.abc_limit = 1",
    'cc.ca_increase = "per_ack"',
]
RTOLAB_CC = {
    "vegas": 'cc = { policy = "vegas_ns2" }',
    "reno": None,
    "westwood": 'cc = { policy = "westwood", window = { initial_window = { segments = 2 }, '
    "max_window = 20000 } }",
}


@dataclass(frozen=True)
class Station:
    """A station: `waypoints` as (t in s, distance from the AP in m along
    x); one waypoint is a fixed position."""

    waypoints: tuple[tuple[float, float], ...]


def prime_at(station: int) -> float:
    """When saturating station `station` sends its one early datagram."""
    return PRIME_AT_S + station * PRIME_GAP_S


@dataclass(frozen=True)
class Setting:
    """What both simulators run."""

    name: str
    duration_s: float
    stations: tuple[Station, ...]
    #: "tcp": one bulk transfer, wired source to the first station;
    #: "cbr": every station saturates the uplink to the AP.
    traffic: str = "tcp"
    #: "vegas", "reno" or "westwood" at the TCP source (`SOURCES`).
    cc: str = "vegas"
    #: rtolab's Vegas with ns-2's loss handling (`fine_retransmit` of
    #: `vegas_ns2`); ns-2's Vegas always has it.
    fine_retransmit: bool = True
    start_s: float = 5.0
    seed: int = 1
    #: Whether the 802.11 interfaces account retransmission time and the
    #: source removes it from its RTT samples.
    timelost: bool = False
    #: Phases of goodput (name, start, end) in seconds.
    phases: tuple[tuple[str, float, float], ...] = field(default=())

    @property
    def size(self) -> float:
        """Side of ns-2's flat grid: the farthest station plus a margin."""
        far = max(d for s in self.stations for _, d in s.waypoints)
        return AP_X + far + 100.0


def tcl(s: Setting, trace: bool = True) -> str:
    """The ns-2 script of `s`; writes `trace.tr` (new trace format, agent
    and MAC events) in its working directory, or, without `trace` (for
    timing), only what ns-2 cannot run without: its wireless nodes need a
    trace target, so the wired links' events go to /dev/null and the
    agent and MAC traces are off."""
    n = len(s.stations)
    on = "ON" if trace else "OFF"
    lines = [
        "set ns_ [new Simulator]",
        "$ns_ use-newtrace",
        f"global defaultRNG; $defaultRNG seed {s.seed}",
        "$ns_ node-config -addressType hierarchical",
        "AddrParams set domain_num_ 2",
        "AddrParams set cluster_num_ {1 1}",
        f"AddrParams set nodes_num_ {{1 {n + 1}}}",
        f"set tr [open {'trace.tr' if trace else '/dev/null'} w]",
        "$ns_ trace-all $tr",
        "set topo [new Topography]",
        f"$topo load_flatgrid {s.size:.0f} {AP_Y * 2:.0f}",
        f"create-god {n + 1}",
        "set W [$ns_ node 0.0.0]",
        "set prop [new Propagation/Shadowing]",
        f"$prop seed predef {s.seed}",
        "$ns_ node-config -adhocRouting DSDV -llType LL -macType Mac/802_11 "
        "-ifqType Queue/DropTail/PriQueue -ifqLen 50 -antType Antenna/OmniAntenna "
        "-propInstance $prop -phyType Phy/WirelessPhy "
        "-channel [new Channel/WirelessChannel] -topoInstance $topo -wiredRouting ON "
        f"-agentTrace {on} -routerTrace OFF -macTrace {on} -movementTrace OFF",
        "set AP [$ns_ node 1.0.0]",
        "$AP random-motion 0",
        f"$AP set X_ {AP_X}; $AP set Y_ {AP_Y}; $AP set Z_ 0.0",
        "$ns_ node-config -wiredRouting OFF",
    ]
    for i, station in enumerate(s.stations):
        d0 = station.waypoints[0][1]
        lines += [
            f"set st({i}) [$ns_ node 1.0.{i + 1}]",
            f"$st({i}) base-station [AddrParams addr2id [$AP node-addr]]",
            f"$st({i}) random-motion 0",
            f"$st({i}) set X_ {AP_X + d0}; $st({i}) set Y_ {AP_Y}; $st({i}) set Z_ 0.0",
        ]
        for (ta, da), (tb, db) in itertools.pairwise(station.waypoints):
            speed = abs(db - da) / (tb - ta)
            lines.append(f'$ns_ at {ta} "$st({i}) setdest {AP_X + db} {AP_Y} {speed:.9f}"')
    lines += [
        f"$ns_ duplex-link $W $AP {WIRED_RATE} {WIRED_DELAY_MS}ms DropTail",
        f"$ns_ queue-limit $W $AP {WIRED_QUEUE}",
        f"$ns_ queue-limit $AP $W {WIRED_QUEUE}",
    ]
    if s.traffic == "tcp":
        agent, pick = SOURCES[s.cc]
        lines += [
            f"set tcp [new {agent}]",
            *([pick] if pick else []),
            *(["$tcp set timelost_ true"] if s.timelost and s.cc == "vegas" else []),
            "$ns_ attach-agent $W $tcp",
            "set sink [new Agent/TCPSink]",
            "$ns_ attach-agent $st(0) $sink",
            "$ns_ connect $tcp $sink",
            "set ftp [new Application/FTP]",
            "$ftp attach-agent $tcp",
            f'$ns_ at {s.start_s} "$ftp start"',
        ]
    else:
        for i in range(n):
            lines += [
                f"set udp({i}) [new Agent/UDP]",
                f"$ns_ attach-agent $st({i}) $udp({i})",
                f"set null({i}) [new Agent/Null]",
                f"$ns_ attach-agent $AP $null({i})",
                f"$ns_ connect $udp({i}) $null({i})",
                f"set cbr({i}) [new Application/Traffic/CBR]",
                f"$cbr({i}) set packetSize_ {CBR_SIZE}",
                f"$cbr({i}) set rate_ {CBR_RATE}",
                f"$cbr({i}) attach-agent $udp({i})",
                f'$ns_ at {s.start_s} "$cbr({i}) start"',
                f"set prime({i}) [new Application/Traffic/CBR]",
                f"$prime({i}) set packetSize_ {CBR_SIZE}",
                f"$prime({i}) set maxpkts_ 1",
                f"$prime({i}) attach-agent $udp({i})",
                f'$ns_ at {prime_at(i):g} "$prime({i}) start"',
            ]
    lines += [
        f'$ns_ at {s.duration_s} "$ns_ flush-trace; close $tr; $ns_ halt"',
        "$ns_ run",
        "",
    ]
    return "\n".join(lines)


#: ns-2.35's 802.11 (docs/wifi.md: the link's `ns2` preset) with its
#: interface queue of 50 packets.
NS2_MAC = '{ preset = "ns2", queue = 50 }'


def segment_data(cc: str) -> int:
    """Bytes of data in each of sender `cc`'s segments in rtolab, so that its
    packets are the size ns-2's agent sends: `packetSize_` of data for
    Reno and TCP-Linux (their agents add the 40 header bytes), 40 bytes
    less for Vegas (its agent adds none; `vegas_ns2`'s documentation)."""
    return PACKET - 40 if cc == "vegas" else PACKET


def ns2_tcp(s: Setting) -> str:
    """A host's TCP: the `ns2` profile (ns-2.35's Agent/TCP defaults:
    1000 bytes of data per packet (960 for Vegas), a 20-packet window,
    initial window 2, RTO from 3 s between 0.2 and 60 s on a 10 ms tick,
    one ACK per segment, no options) with the setting's sender
    (`RTOLAB_CC`), and the timelost option on both ends when the setting
    has it."""
    flag = "true" if s.timelost else "false"
    lines = ['profile = "ns2"', "[host.tcp]"]
    cc = RTOLAB_CC[s.cc]
    if cc is not None and s.cc == "vegas" and not s.fine_retransmit:
        cc = 'cc = { policy = "vegas_ns2", fine_retransmit = false }'
    if cc is not None:
        lines.append(cc)
    if segment_data(s.cc) != PACKET:
        lines.append(f"mss = {segment_data(s.cc)}")
    if s.cc == "reno":
        lines += NS2_RENO
    # The `ns2` profile's sink sends one ACK per segment and no window
    # updates, as ns-2's TCPSink.
    lines += [
        f"timelost = {flag}",
        f"rtt_correction = {flag}",
    ]
    return "\n".join(lines)


def toml(s: Setting) -> str:
    """The rtolab scenario of `s`: hosts `source`, `ap`, `st0`..; the
    wireless link `wlan`; ns-2's defaults by the `ns2` presets."""
    n = len(s.stations)
    out = [
        f'name = "ns2check-{s.name}"',
        f"seed = {s.seed}",
        f'duration = "{s.duration_s:g}s"',
        "",
        "[[host]]",
        'name = "source"',
        ns2_tcp(s),
        "",
        "[[host]]",
        'name = "ap"',
    ]
    for i in range(n):
        out += ["", "[[host]]", f'name = "st{i}"', ns2_tcp(s)]
    out += [
        "",
        "[[link]]",
        'name = "wired"',
        'kind = "point-to-point"',
        'ends = [ { host = "source", address = "10.0.1.1/24" }, '
        '{ host = "ap", address = "10.0.1.2/24" } ]',
        f'rate = "{WIRED_RATE}ps"',
        f'delay = "{WIRED_DELAY_MS}ms"',
        f"queue = {WIRED_QUEUE}",
        "",
        "[[link]]",
        'name = "wlan"',
        'kind = "wifi"',
        f'ap = {{ host = "ap", address = "10.0.2.1/24", position = {{ x = {AP_X}, y = {AP_Y} }} }}',
        "stations = [",
    ]
    for i, st in enumerate(s.stations):
        if len(st.waypoints) == 1:
            where = f"position = {{ x = {AP_X + st.waypoints[0][1]}, y = {AP_Y} }}"
        else:
            points = ", ".join(
                f'{{ at = "{t:g}s", x = {AP_X + d}, y = {AP_Y} }}' for t, d in st.waypoints
            )
            where = f"mobility = {{ waypoints = [ {points} ] }}"
        out.append(f'  {{ host = "st{i}", address = "10.0.2.{i + 2}/24", {where} }},')
    out += [
        "]",
        f"mac = {NS2_MAC}",
        f"timelost = {'true' if s.timelost else 'false'}",
        "",
        "[[route]]",
        'host = "source"',
        'destination = "default"',
        'via = "10.0.1.2"',
    ]
    if s.traffic == "tcp":
        out += [
            "",
            "[[app]]",
            'kind = "tcp-sink"',
            'name = "sink"',
            'host = "st0"',
            "port = 5001",
            "",
            "[[app]]",
            'kind = "tcp-bulk"',
            'name = "bulk"',
            'host = "source"',
            'peer = "10.0.2.2:5001"',
            f'start = "{s.start_s:g}s"',
        ]
    else:
        out += ["", "[[app]]", 'kind = "sink"', 'name = "sink"', 'host = "ap"', "port = 9000"]
        for i in range(n):
            out += [
                "",
                "[[app]]",
                'kind = "cbr"',
                f'name = "cbr{i}"',
                f'host = "st{i}"',
                'destination = "10.0.2.1:9000"',
                f"size = {CBR_SIZE + STATION_IP_HEADER - 28}",
                f'rate = "{CBR_RATE}ps"',
                f'start = "{s.start_s:g}s"',
                "",
                "[[app]]",
                'kind = "cbr"',
                f'name = "prime{i}"',
                f'host = "st{i}"',
                'destination = "10.0.2.1:9000"',
                f"size = {CBR_SIZE + STATION_IP_HEADER - 28}",
                f'rate = "{CBR_RATE}ps"',
                f'start = "{prime_at(i):g}s"',
                # Stops before its second datagram would go (4 ms later).
                f'stop = "{prime_at(i) + 0.001:g}s"',
            ]
    return "\n".join(out) + "\n"
