//! MRHOF (RFC 6719) over ETX, computed as Contiki 3.0's `rpl-mrhof.c` does
//! with no metric container (`RPL_DAG_MC_NONE`, its default): a node's rank
//! is its parent's rank plus the link's ETX in units of 1/256, and the path
//! cost compared between parents is that same sum.

/// Fixed-point scale of ETX: an ETX of 1 is 256 (`RPL_DAG_MC_ETX_DIVISOR`,
/// `rpl-private.h`).
pub const ETX_DIVISOR: u16 = 256;
/// Denominator of the moving average's weights (`ETX_SCALE`, `rpl-mrhof.c`).
pub const ETX_SCALE: u32 = 100;
/// Weight of the recorded ETX in the moving average, out of [`ETX_SCALE`]
/// (`ETX_ALPHA`, `rpl-mrhof.c`).
pub const ETX_ALPHA: u32 = 90;
/// ETX charged for a transmission that was never acknowledged
/// (`MAX_LINK_METRIC`, `rpl-mrhof.c`: the NOACK penalty).
pub const MAX_LINK_METRIC: u16 = 10;
/// Path cost of no parent, in ETX (`MAX_PATH_COST`, `rpl-mrhof.c`).
pub const MAX_PATH_COST: u16 = 100;
/// A parent must be better by more than `ETX_DIVISOR / this` to replace the
/// preferred one (`PARENT_SWITCH_THRESHOLD_DIV`, `rpl-mrhof.c`).
pub const PARENT_SWITCH_THRESHOLD_DIV: u16 = 2;
/// Rank of a node with no route to the root (`INFINITE_RANK`,
/// `rpl-private.h`).
pub const INFINITE_RANK: u16 = 0xffff;
/// Objective Code Point of MRHOF (RFC 6719 §7).
pub const OCP_MRHOF: u16 = 1;

/// How the MAC's attempt to send one unicast frame ended (Contiki's
/// `MAC_TX_*` codes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxStatus {
    /// Acknowledged.
    Ok,
    /// Never acknowledged after every retransmission.
    NoAck,
    /// The channel stayed busy or the frame collided.
    Collision,
    /// Deferred by the MAC.
    Deferred,
    /// Any other transmission error.
    Error,
    /// An error retrying cannot fix.
    ErrorFatal,
}

/// The ETX estimate of one neighbour (Contiki 3.0 keeps it in the IPv6
/// neighbour table, with a per-parent "valid" flag).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinkEstimate {
    etx: u16,
    valid: bool,
}

impl LinkEstimate {
    /// The estimate given to a new candidate parent before any of our frames
    /// reached it: `init_link_metric` ETX (`RPL_INIT_LINK_METRIC`,
    /// `rpl_add_parent` in `rpl-dag.c`).
    pub fn new(init_link_metric: u8) -> Self {
        LinkEstimate {
            etx: u16::from(init_link_metric) * ETX_DIVISOR,
            valid: false,
        }
    }

    /// The ETX, in units of 1/[`ETX_DIVISOR`].
    pub fn etx(&self) -> u16 {
        self.etx
    }

    /// Whether a transmission outcome has replaced the initial guess.
    pub fn measured(&self) -> bool {
        self.valid
    }

    /// Feeds one transmission outcome (`neighbor_link_callback`): the first
    /// outcome replaces the initial guess, later ones enter an exponential
    /// moving average weighted 90:10. An unacknowledged frame counts as
    /// [`MAX_LINK_METRIC`] transmissions; collisions and other errors say
    /// nothing about the link and are ignored.
    pub fn update(&mut self, status: TxStatus, transmissions: u32) {
        let packet_etx = match status {
            TxStatus::Ok => transmissions.saturating_mul(u32::from(ETX_DIVISOR)),
            TxStatus::NoAck => u32::from(MAX_LINK_METRIC * ETX_DIVISOR),
            _ => return,
        };
        // Contiki keeps it in 16 bits.
        let packet_etx = packet_etx.min(u32::from(u16::MAX));
        self.etx = if self.valid {
            let avg = (u32::from(self.etx) * ETX_ALPHA + packet_etx * (ETX_SCALE - ETX_ALPHA))
                / ETX_SCALE;
            avg as u16
        } else {
            self.valid = true;
            packet_etx as u16
        };
    }
}

/// The rank through a parent advertising `parent_rank` over a link of ETX
/// `link_etx` (`calculate_rank` with a parent and base rank 0), capped at
/// [`INFINITE_RANK`].
pub fn rank_via(parent_rank: u16, link_etx: u16) -> u16 {
    if INFINITE_RANK - parent_rank < link_etx {
        INFINITE_RANK
    } else {
        parent_rank + link_etx
    }
}

/// `calculate_rank` without a parent: from `base_rank` (0: none) adding the
/// initial link metric, or infinite.
pub fn rank_without_parent(base_rank: u16, init_link_metric: u8) -> u16 {
    if base_rank == 0 {
        INFINITE_RANK
    } else {
        rank_via(base_rank, u16::from(init_link_metric) * ETX_DIVISOR)
    }
}

/// The path cost through a parent (`calculate_path_metric`): its rank plus
/// the link's ETX. Contiki adds in 16 bits and lets the sum wrap; here it
/// saturates, so a parent near infinite rank never looks cheap.
pub fn path_metric(parent_rank: u16, link_etx: u16) -> u16 {
    parent_rank.saturating_add(link_etx)
}

/// The path cost of having no parent.
pub const NO_PARENT_PATH_METRIC: u16 = MAX_PATH_COST * ETX_DIVISOR;

/// Which of two candidate parents MRHOF prefers (`best_parent`), given their
/// path costs. When one of them is the preferred parent and the costs are
/// within half an ETX of each other, the preferred parent stays (the switch
/// hysteresis); otherwise the cheaper wins and a tie goes to the second.
pub fn prefer_first(p1_metric: u16, p2_metric: u16, preferred: Option<bool>) -> bool {
    let min_diff = i32::from(ETX_DIVISOR / PARENT_SWITCH_THRESHOLD_DIV);
    let (m1, m2) = (i32::from(p1_metric), i32::from(p2_metric));
    if let Some(first_is_preferred) = preferred {
        if m1 < m2 + min_diff && m1 > m2 - min_diff {
            return first_is_preferred;
        }
    }
    m1 < m2
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn etx_follows_contikis_moving_average() {
        let mut link = LinkEstimate::new(2);
        assert_eq!((link.etx(), link.measured()), (512, false));
        // A collision leaves the initial guess alone.
        link.update(TxStatus::Collision, 3);
        assert_eq!((link.etx(), link.measured()), (512, false));
        // The first outcome replaces the guess: one transmission is ETX 1.
        link.update(TxStatus::Ok, 1);
        assert_eq!((link.etx(), link.measured()), (256, true));
        // No ACK counts as 10 transmissions: (256·90 + 2560·10) / 100.
        link.update(TxStatus::NoAck, 4);
        assert_eq!(link.etx(), 486);
        // Two transmissions: (486·90 + 512·10) / 100 = 488.6, truncated.
        link.update(TxStatus::Ok, 2);
        assert_eq!(link.etx(), 488);
        // A neighbour that stops answering approaches ETX 10.
        for _ in 0..100 {
            link.update(TxStatus::NoAck, 4);
        }
        assert!(link.etx() > 2540 && link.etx() <= 2560, "{}", link.etx());
        // A first outcome of no ACK goes straight to the penalty.
        let mut fresh = LinkEstimate::new(2);
        fresh.update(TxStatus::NoAck, 1);
        assert_eq!(fresh.etx(), 2560);
    }

    #[test]
    fn rank_arithmetic_by_hand() {
        // Root rank 256 (MinHopRankIncrease) and the initial ETX 2: 768.
        assert_eq!(rank_via(256, 2 * ETX_DIVISOR), 768);
        // One hop further over a measured ETX of 1.5 (384): 1152.
        assert_eq!(rank_via(768, 384), 1152);
        // Capped at infinity rather than wrapping.
        assert_eq!(rank_via(65000, 2560), INFINITE_RANK);
        assert_eq!(rank_via(INFINITE_RANK, 0), INFINITE_RANK);
        assert_eq!(rank_without_parent(0, 2), INFINITE_RANK);
        assert_eq!(rank_without_parent(256, 2), 768);
        assert_eq!(path_metric(768, 512), 1280);
        assert_eq!(path_metric(65500, 512), u16::MAX);
        assert_eq!(NO_PARENT_PATH_METRIC, 25600);
    }

    #[test]
    fn hysteresis_keeps_the_preferred_parent_within_half_an_etx() {
        // Neither is preferred: the cheaper wins, a tie goes to the second.
        assert!(prefer_first(1000, 1100, None));
        assert!(!prefer_first(1000, 1000, None));
        // First preferred and the second cheaper by 127 < 128: keep.
        assert!(prefer_first(1127, 1000, Some(true)));
        // Cheaper by exactly 128: switch.
        assert!(!prefer_first(1128, 1000, Some(true)));
        // Second preferred, first cheaper by 100: keep the second.
        assert!(!prefer_first(900, 1000, Some(false)));
        assert!(prefer_first(800, 1000, Some(false)));
    }
}
