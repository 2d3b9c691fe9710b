//! The emulator's only `unsafe` code: two system calls the safe crates do
//! not wrap.
//!
//! * borrowing a TUN device's descriptor, which the `tun` crate exposes only
//!   as a raw fd, so `ppoll` can wait on it;
//! * giving the engine thread a real-time scheduling policy, so compiles
//!   and tests sharing the machine do not delay its writes (nix has no
//!   wrapper for `sched_setscheduler`).
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{BorrowedFd, RawFd};

/// Borrows `fd` for as long as `owner` lives.
///
/// `owner` must own `fd` and close it only when dropped.
pub(crate) fn borrow_fd<T: ?Sized>(_owner: &T, fd: RawFd) -> BorrowedFd<'_> {
    // SAFETY: the caller passes the object that owns `fd`; the borrow is
    // tied to its lifetime, so the descriptor stays open while borrowed.
    unsafe { BorrowedFd::borrow_raw(fd) }
}

/// The scheduling policy of the calling thread, to put back later.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SchedPolicy {
    policy: libc::c_int,
    priority: libc::c_int,
}

/// The calling thread's policy and priority.
pub(crate) fn current_policy() -> io::Result<SchedPolicy> {
    let mut param = libc::sched_param { sched_priority: 0 };
    // SAFETY: `param` is a valid, writable sched_param; pid 0 is this thread.
    let policy = unsafe { libc::sched_getscheduler(0) };
    if policy < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: as above.
    if unsafe { libc::sched_getparam(0, &mut param) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(SchedPolicy {
        policy,
        priority: param.sched_priority,
    })
}

/// Sets the calling thread's policy (Linux schedules threads separately).
pub(crate) fn set_policy(p: SchedPolicy) -> io::Result<()> {
    let param = libc::sched_param {
        sched_priority: p.priority,
    };
    // SAFETY: `param` is a valid sched_param that outlives the call.
    if unsafe { libc::sched_setscheduler(0, p.policy, &param) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `SCHED_FIFO` at a low real-time priority: above every ordinary
/// process, below the kernel's own real-time threads.
pub(crate) fn fifo() -> SchedPolicy {
    SchedPolicy {
        policy: libc::SCHED_FIFO,
        priority: 10,
    }
}

/// Puts another process (an lwIP host program) under the engine thread's
/// real-time policy, so a busy machine delays its answers no more than
/// the engine's own writes. It keeps the policy until it exits.
pub(crate) fn make_process_realtime(pid: libc::pid_t) -> io::Result<()> {
    let p = fifo();
    let param = libc::sched_param {
        sched_priority: p.priority,
    };
    // SAFETY: a plain system call on a process id, with a valid parameter.
    if unsafe { libc::sched_setscheduler(pid, p.policy, &param) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Runs the calling thread under `SCHED_FIFO` until dropped, then puts its
/// previous policy back. Best effort: without the privilege it does
/// nothing.
pub(crate) struct RealtimeGuard {
    previous: Option<SchedPolicy>,
}

impl RealtimeGuard {
    /// Switches the calling thread to real-time scheduling if it can.
    pub(crate) fn enter() -> RealtimeGuard {
        let previous = current_policy().ok();
        let previous = previous.filter(|_| set_policy(fifo()).is_ok());
        RealtimeGuard { previous }
    }

    /// Whether the switch happened.
    pub(crate) fn active(&self) -> bool {
        self.previous.is_some()
    }
}

impl Drop for RealtimeGuard {
    fn drop(&mut self) {
        if let Some(p) = self.previous {
            let _ = set_policy(p);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn realtime_guard_restores_the_policy() {
        let before = current_policy().unwrap();
        {
            let guard = RealtimeGuard::enter();
            if guard.active() {
                assert_eq!(current_policy().unwrap().policy, libc::SCHED_FIFO);
            }
        }
        let after = current_policy().unwrap();
        assert_eq!(
            (after.policy, after.priority),
            (before.policy, before.priority)
        );
    }
}
