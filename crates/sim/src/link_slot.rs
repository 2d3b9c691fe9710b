//! A link as the simulator keeps it: the model, the interfaces attached
//! to it and its pending wake-up. Apart from the simulator so that the
//! apps' context can ask a link about a path (the path hints of a mesh)
//! without importing the simulator that drives the apps.

use rtolab_time::SimTime;

use crate::link::{Link, Medium};
use crate::node::IfaceId;

pub(crate) struct LinkSlot {
    pub(crate) name: String,
    pub(crate) link: Link,
    /// What the link carries, asked once when it was added: how the IP
    /// layer hands it datagrams.
    pub(crate) medium: Medium,
    pub(crate) ports: Vec<IfaceId>,
    /// The instant of the pending wakeup event, if any.
    pub(crate) wakeup: Option<SimTime>,
    pub(crate) generation: u32,
}
