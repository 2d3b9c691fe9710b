#!/usr/bin/env python3
"""802.11b cases in ns-3, timed, for side-by-side comparison with rtolab's
802.11 link (docs/timelost.md, docs/performance.md).

Cases (``--case``):

* ``single``: one station ``--distance`` metres from an access point; one
  saturating flow from the AP to the station (``--transport tcp``: a bulk
  TCP NewReno flow, ``udp``: constant-rate UDP above the channel's
  capacity).
* ``saturated``: ``--stations`` stations 5 m from the AP, each sending
  saturating UDP to it (Bianchi's saturation case).
* ``study``: the timelost study's scenario as ``scenarios/wifi-timelost.toml``
  sets it up (timelost spec §3): a wired TCP Vegas source, 100 Mbit/s and
  ``--wired-delay`` to the AP, a mobile sink that leaves the AP in a
  straight line from ``--start-distance`` at t = 0 to ``--edge-distance``
  at 150 s and stays there until ``--seconds``; the source starts at 5 s.

Radio, matched to ns-2's shadowing model with ns-2's defaults as rtolab's
``shadowing`` propagation uses them: 914 MHz, 24.5 dBm (0.2818 W), Friis
loss at the 1 m reference distance, path-loss exponent 2, and a new
N(0, 4 dB) draw for every frame at every receiver
(LogDistancePropagationLossModel followed by RandomPropagationLossModel);
frames below ns-2's RXThresh_ (-64.4 dBm) are not received
(RxSensitivity), the channel is busy from its CSThresh_ (-78.1 dBm). DSSS
at ``--rate`` (default 11 Mbit/s), control frames at 1 Mbit/s, no RTS/CTS.

Prints one JSON line: wall seconds of Simulator::Run alone, goodput at the
receiver(s) in Mbit/s, and simulated seconds per wall second.

Run it with the interpreter of a virtual environment that has the ``ns3``
package from PyPI (``ns3-setup.sh`` in the shared benchmark folder beside
the repository creates one), from a directory without another ns-3
installation below it (the package refuses to start when it finds two).
"""

from __future__ import annotations

import argparse
import json
import math
import time
from typing import Any

#: ns-2's defaults (tcl/lib/ns-default.tcl), as rtolab's shadowing model.
TX_POWER_W = 0.28183815
FREQUENCY_HZ = 914e6
RX_THRESHOLD_W = 3.652e-10
CS_THRESHOLD_W = 1.559e-11
PATH_LOSS_EXPONENT = 2.0
STD_DB = 4.0
SPEED_OF_LIGHT = 299_792_458.0
STOP_S = 150.0


def dbm(watts: float) -> float:
    return 10 * math.log10(watts * 1e3)


def friis_loss_db(distance_m: float = 1.0) -> float:
    """Free-space loss at the reference distance, unit gains, L = 1."""
    wavelength = SPEED_OF_LIGHT / FREQUENCY_HZ
    return 20 * math.log10(4 * math.pi * distance_m / wavelength)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--case", choices=("single", "saturated", "study"), default="single")
    p.add_argument("--transport", choices=("tcp", "udp"), default="tcp")
    p.add_argument("--distance", type=float, default=10.0)
    p.add_argument("--stations", type=int, default=20)
    p.add_argument("--start-distance", type=float, default=5.0, help="study: metres at t = 0")
    p.add_argument("--edge-distance", type=float, default=550.0, help="study: metres from 150 s")
    p.add_argument("--wired-delay", default="10ms", help="study: the wired link's delay")
    p.add_argument("--rate", default="DsssRate11Mbps")
    p.add_argument("--seconds", type=float, default=60.0)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--segment", type=int, default=1448)
    a = p.parse_args()

    from ns import ns  # imported late: it takes seconds

    ns.RngSeedManager.SetSeed(1)
    ns.RngSeedManager.SetRun(a.seed)
    ns.Config.SetDefault("ns3::TcpSocket::SegmentSize", ns.UintegerValue(a.segment))
    cc = "ns3::TcpVegas" if a.case == "study" else "ns3::TcpNewReno"
    ns.Config.SetDefault("ns3::TcpL4Protocol::SocketType", ns.StringValue(cc))

    stations = a.stations if a.case == "saturated" else 1
    ap = ns.NodeContainer()
    ap.Create(1)
    sta = ns.NodeContainer()
    sta.Create(stations)

    channel = ns.YansWifiChannelHelper()
    channel.SetPropagationDelay("ns3::ConstantSpeedPropagationDelayModel")
    channel.AddPropagationLoss(
        "ns3::LogDistancePropagationLossModel",
        "Exponent",
        ns.DoubleValue(PATH_LOSS_EXPONENT),
        "ReferenceDistance",
        ns.DoubleValue(1.0),
        "ReferenceLoss",
        ns.DoubleValue(friis_loss_db()),
    )
    channel.AddPropagationLoss(
        "ns3::RandomPropagationLossModel",
        "Variable",
        ns.StringValue(f"ns3::NormalRandomVariable[Mean=0|Variance={STD_DB**2}]"),
    )
    phy = ns.YansWifiPhyHelper()
    phy.SetChannel(channel.Create())
    phy.Set("TxPowerStart", ns.DoubleValue(dbm(TX_POWER_W)))
    phy.Set("TxPowerEnd", ns.DoubleValue(dbm(TX_POWER_W)))
    phy.Set("RxSensitivity", ns.DoubleValue(dbm(RX_THRESHOLD_W)))
    phy.Set("CcaEdThreshold", ns.DoubleValue(dbm(CS_THRESHOLD_W)))
    wifi = ns.WifiHelper()
    wifi.SetStandard(ns.WIFI_STANDARD_80211b)
    wifi.SetRemoteStationManager(
        "ns3::ConstantRateWifiManager",
        "DataMode",
        ns.StringValue(a.rate),
        "ControlMode",
        ns.StringValue("DsssRate1Mbps"),
    )
    mac = ns.WifiMacHelper()
    ssid = ns.Ssid("rtolab")
    mac.SetType("ns3::StaWifiMac", "Ssid", ns.SsidValue(ssid))
    sta_devs = wifi.Install(phy, mac, sta)
    mac.SetType("ns3::ApWifiMac", "Ssid", ns.SsidValue(ssid))
    ap_devs = wifi.Install(phy, mac, ap)

    mobility = ns.MobilityHelper()
    positions = ns.ListPositionAllocator()
    positions.Add(ns.Vector(0.0, 0.0, 0.0))
    mobility.SetPositionAllocator(positions)
    mobility.SetMobilityModel("ns3::ConstantPositionMobilityModel")
    mobility.Install(ap)
    if a.case == "study":
        mobility.SetMobilityModel("ns3::WaypointMobilityModel")
        mobility.Install(sta)
        model = sta.Get(0).GetObject[ns.WaypointMobilityModel]()
        model.AddWaypoint(ns.Waypoint(ns.Seconds(0.0), ns.Vector(a.start_distance, 0.0, 0.0)))
        edge = ns.Vector(a.edge_distance, 0.0, 0.0)
        model.AddWaypoint(ns.Waypoint(ns.Seconds(STOP_S), edge))
    else:
        around = ns.ListPositionAllocator()
        for i in range(stations):
            if a.case == "single":
                around.Add(ns.Vector(a.distance, 0.0, 0.0))
            else:
                angle = 2 * math.pi * i / stations
                around.Add(ns.Vector(5 * math.cos(angle), 5 * math.sin(angle), 0.0))
        mobility.SetPositionAllocator(around)
        mobility.SetMobilityModel("ns3::ConstantPositionMobilityModel")
        mobility.Install(sta)

    internet = ns.InternetStackHelper()
    internet.Install(ap)
    internet.Install(sta)
    addr = ns.Ipv4AddressHelper()
    addr.SetBase(ns.Ipv4Address("10.1.1.0"), ns.Ipv4Mask("255.255.255.0"))
    sta_ifs = addr.Assign(sta_devs)
    ap_ifs = addr.Assign(ap_devs)

    source = ap.Get(0)
    if a.case == "study":
        wired = ns.NodeContainer()
        wired.Create(1)
        internet.Install(wired)
        p2p = ns.PointToPointHelper()
        p2p.SetDeviceAttribute("DataRate", ns.StringValue("100Mbps"))
        p2p.SetChannelAttribute("Delay", ns.StringValue(a.wired_delay))
        link = ns.NodeContainer()
        link.Add(wired.Get(0))
        link.Add(ap.Get(0))
        wired_devs = p2p.Install(link)
        addr.SetBase(ns.Ipv4Address("10.2.1.0"), ns.Ipv4Mask("255.255.255.0"))
        addr.Assign(wired_devs)
        ns.Ipv4GlobalRoutingHelper.PopulateRoutingTables()
        source = wired.Get(0)

    # Association settles in the first second; the study's source starts at 5 s.
    start = 5.0 if a.case == "study" else 1.0
    sinks = []
    port = 9000
    if a.case == "saturated":
        for i in range(stations):
            client = ns.OnOffHelper(
                "ns3::UdpSocketFactory",
                ns.InetSocketAddress(ap_ifs.GetAddress(0), port).ConvertTo(),
            )
            client.SetConstantRate(ns.DataRate("12Mbps"), 1472)
            apps = client.Install(sta.Get(i))
            apps.Start(ns.Seconds(start + 0.001 * i))
        sink = ns.PacketSinkHelper(
            "ns3::UdpSocketFactory", ns.InetSocketAddress(ns.Ipv4Address.GetAny(), port).ConvertTo()
        )
        sinks.append(sink.Install(ap.Get(0)))
    else:
        target = ns.InetSocketAddress(sta_ifs.GetAddress(0), port).ConvertTo()
        if a.transport == "tcp" or a.case == "study":
            helper = ns.BulkSendHelper("ns3::TcpSocketFactory", target)
            helper.SetAttribute("MaxBytes", ns.UintegerValue(0))
            factory = "ns3::TcpSocketFactory"
        else:
            helper = ns.OnOffHelper("ns3::UdpSocketFactory", target)
            helper.SetConstantRate(ns.DataRate("12Mbps"), 1472)
            factory = "ns3::UdpSocketFactory"
        apps = helper.Install(source)
        apps.Start(ns.Seconds(start))
        sink = ns.PacketSinkHelper(
            factory, ns.InetSocketAddress(ns.Ipv4Address.GetAny(), port).ConvertTo()
        )
        sinks.append(sink.Install(sta.Get(0)))

    ns.Simulator.Stop(ns.Seconds(a.seconds))
    t0 = time.perf_counter()
    ns.Simulator.Run()
    wall = time.perf_counter() - t0
    rx = sum(ns.cppyy.gbl.ns3.DynamicCast[ns.PacketSink](s.Get(0)).GetTotalRx() for s in sinks)
    ns.Simulator.Destroy()
    out: dict[str, Any] = {
        "simulator": "ns-3.44",
        "case": a.case,
        "rate": a.rate,
        "sim_seconds": a.seconds,
        "seed": a.seed,
        "wall_seconds": round(wall, 4),
        "sim_seconds_per_wall_second": round(a.seconds / wall, 2) if wall else None,
        "bytes_delivered": int(rx),
        "goodput_mbps": round(rx * 8 / (a.seconds - start) / 1e6, 4),
    }
    if a.case == "single":
        out.update(distance_m=a.distance, transport=a.transport)
    elif a.case == "saturated":
        out.update(stations=stations)
    else:
        out.update(
            start_distance_m=a.start_distance,
            edge_distance_m=a.edge_distance,
            wired_delay=a.wired_delay,
        )
    print(json.dumps(out))


if __name__ == "__main__":
    main()
