//! Renewals that fall due together, sent as one call. Every hold's watchdog
//! renews on a grid of ticks shared by the process, so at 100,000 holds a
//! few hundred renewals fall due at each tick; sent one script call each,
//! they cost the server one script's entry, parsing and reply each. Here
//! the renewals that reach one deployment within a wake-up of the runtime
//! are gathered (per process: `Local` holds them), grouped by the kind of
//! hold they renew (`Batch`: the script that renews several) and, on a
//! Cluster, by slot (a script's keys must share one), and sent at most
//! `MOST` to a call, each renewal getting its own answer back. A batch of
//! one goes as that hold's own step.
//!
//! Nothing waits behind another batch: each call is sent as soon as it is
//! gathered, so a call that hangs (a Cluster node that stopped answering)
//! holds up only the renewals it carries, each of which its watchdog retries
//! until its own deadline, as it would alone. A call that fails other than
//! by its connection (a key of one hold turned into another type) is sent
//! again hold by hold, so one hold's error is never another's.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures_util::future::{join_all, BoxFuture};
use redis::cluster_routing::Slot;
use tokio::sync::oneshot;

use super::Backend;
use crate::error::{Error, Result};
use crate::transport::conn::Io;
use crate::transport::replication::Shortfall;

/// The most renewals one call carries (Redisson's `lockWatchdogBatchSize`
/// is 100 too): about 100 to 200 us of the server's time, short enough
/// not to hold up the other clients of a shared server.
pub(crate) const MOST: usize = 100;

/// How many times the gathering lets the runtime's other ready tasks run
/// (the watchdogs woken by the same tick) before it sends, at most: it
/// stops as soon as a round brings no renewal more.
const GATHERING_ROUNDS: usize = 8;

/// One hold's renewal: its keys (the first names its slot), its token, its
/// fence (recorded in a hold taken without it), its value as its owner
/// wrote it when known (see `Steps::refresh_on`'s `Holder`) and the ttl it
/// asks for. The keys and the token are the hold's own, shared, not copied:
/// at 100,000 holds, ten thousand renewals a second.
#[derive(Debug, Clone)]
pub(crate) struct Renewal {
    pub keys: Arc<[String]>,
    pub token: Arc<str>,
    pub fence: Option<i64>,
    pub written: Option<Arc<str>>,
    pub ttl_ms: u64,
}

/// What one call renewing several holds answered: whether each still held
/// (and now holds for its ttl), in the order sent; the value each has now
/// when the call wrote it by comparing (empty: none known); and, when
/// fewer replicas than asked acknowledged the call, how many did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Answers {
    pub held: Vec<bool>,
    pub written: Vec<Option<Arc<str>>>,
    pub shortfall: Option<Shortfall>,
}

/// What one renewal found: it still held (and now holds for its ttl);
/// `shortfall`: it held, but fewer replicas than asked acknowledged it;
/// `written`: the value it has now, when known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Renewed {
    pub held: bool,
    pub shortfall: Option<Shortfall>,
    pub written: Option<Arc<str>>,
}

/// A kind of hold whose renewals go together (one shape of keys, renewed by
/// one script): how a batch of them is sent.
pub(crate) struct Batch {
    /// Sends `renewals` (on a Cluster, all of one slot) as one call; one
    /// renewal alone as that hold's own step.
    pub send: fn(Backend, Arc<[Renewal]>) -> BoxFuture<'static, Result<Answers>>,
}

/// This process's renewals gathered and not yet sent, on one deployment.
#[derive(Default)]
pub(crate) struct Renewals {
    pending: Mutex<Pending>,
}

#[derive(Default)]
struct Pending {
    due: Vec<Due>,
    /// A task is gathering them: the next renewal joins it.
    gathering: bool,
}

/// Where one renewal's answer goes.
type Answer = oneshot::Sender<Result<Renewed>>;

/// A renewal waiting for its call, and where its answer goes.
struct Due {
    batch: &'static Batch,
    slot: Option<Slot>,
    renewal: Renewal,
    answer: Answer,
}

impl Backend {
    /// Renews as `batch` does, in one call with the other renewals of its
    /// kind (and, on a Cluster, its slot) that fall due with it in this
    /// process. The watchdog's; an `extend` is sent alone, at once.
    pub(crate) async fn renew(&self, batch: &'static Batch, renewal: Renewal) -> Result<Renewed> {
        let renewals = self.local().renewals.clone();
        let slot = if self.is_cluster() { renewal.keys.first().map(Slot::for_key) } else { None };
        let (answer, answered) = oneshot::channel();
        let first = {
            let mut pending = renewals.pending.lock().unwrap();
            pending.due.push(Due { batch, slot, renewal, answer });
            !std::mem::replace(&mut pending.gathering, true)
        };
        if first {
            tokio::spawn(renewals.gather(self.via(Io::Multiplexed)));
        }
        answered.await.unwrap_or_else(|_| Err(Error::Connection("the renewal's call was dropped".into())))
    }
}

impl Renewals {
    /// Lets the renewals woken by the same tick join the first, then sends
    /// them, each group's in calls of at most `MOST`.
    async fn gather(self: Arc<Self>, client: Backend) {
        let mut seen = 0;
        for _ in 0..GATHERING_ROUNDS {
            tokio::task::yield_now().await;
            let now = self.pending.lock().unwrap().due.len();
            if now == seen {
                break;
            }
            seen = now;
        }
        let due = {
            let mut pending = self.pending.lock().unwrap();
            pending.gathering = false;
            // Room for as many as this tick brought: the next one likely brings as many.
            let room = Vec::with_capacity(pending.due.len());
            std::mem::replace(&mut pending.due, room)
        };
        for calls in groups(due) {
            for call in chunks(calls) {
                tokio::spawn(send(client.clone(), call));
            }
        }
    }
}

/// The renewals of each kind and slot, in the order they fell due.
fn groups(due: Vec<Due>) -> Vec<Vec<Due>> {
    let mut index: HashMap<(*const Batch, Option<Slot>), usize> = HashMap::new();
    let mut groups: Vec<Vec<Due>> = Vec::new();
    for d in due {
        let at = *index.entry((std::ptr::from_ref(d.batch), d.slot)).or_insert_with(|| {
            groups.push(Vec::new());
            groups.len() - 1
        });
        groups[at].push(d);
    }
    groups
}

/// `group` cut into calls of at most `MOST`.
fn chunks(mut group: Vec<Due>) -> Vec<Vec<Due>> {
    let mut calls = Vec::with_capacity(group.len().div_ceil(MOST));
    while group.len() > MOST {
        let rest = group.split_off(MOST);
        calls.push(std::mem::replace(&mut group, rest));
    }
    calls.push(group);
    calls
}

/// Sends one call and hands each renewal its answer. A renewal whose
/// watchdog has stopped (its hold released) is left out.
async fn send(client: Backend, mut call: Vec<Due>) {
    call.retain(|d| !d.answer.is_closed());
    let Some(first) = call.first() else { return };
    let batch = first.batch;
    let (renewals, answers): (Vec<Renewal>, Vec<Answer>) =
        call.into_iter().map(|d| (d.renewal, d.answer)).unzip();
    let renewals: Arc<[Renewal]> = renewals.into();
    match (batch.send)(client.clone(), renewals.clone()).await {
        Ok(Answers { held, mut written, shortfall }) if held.len() == answers.len() => {
            written.resize(held.len(), None);
            for ((answer, held), written) in answers.into_iter().zip(held).zip(written) {
                let _ = answer.send(Ok(Renewed { held, shortfall: shortfall.filter(|_| held), written }));
            }
        }
        Ok(Answers { held, .. }) => {
            let e = Error::Redis(format!(
                "a batch of {} renewals was answered {} times: renewing them one by one",
                answers.len(),
                held.len()
            ));
            one_by_one(&client, batch, &renewals, answers, &e).await;
        }
        Err(e) if answers.len() > 1 && !matches!(e, Error::Connection(_)) => {
            one_by_one(&client, batch, &renewals, answers, &e).await;
        }
        Err(e) => {
            for answer in answers {
                let _ = answer.send(Err(e.clone()));
            }
        }
    }
}

/// Sends each renewal of a call that failed (`e`, not its connection) as
/// its own step, so that whichever hold failed it fails alone.
async fn one_by_one(client: &Backend, batch: &Batch, renewals: &[Renewal], answers: Vec<Answer>, e: &Error) {
    log::debug!("a batch of {} renewals failed ({e}): renewing them one by one", renewals.len());
    let each = renewals.iter().zip(answers).map(|(renewal, answer)| async move {
        let alone: Arc<[Renewal]> = Arc::from([renewal.clone()]);
        let renewed = (batch.send)(client.clone(), alone).await.and_then(|a| match a.held.as_slice() {
            [held] => Ok(Renewed {
                held: *held,
                shortfall: a.shortfall.filter(|_| *held),
                written: a.written.into_iter().next().flatten(),
            }),
            other => Err(Error::Redis(format!("a renewal was answered {} times", other.len()))),
        });
        let _ = answer.send(renewed);
    });
    join_all(each).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn never(_: Backend, _: Arc<[Renewal]>) -> BoxFuture<'static, Result<Answers>> {
        Box::pin(async { Err(Error::Redis("not sent".into())) })
    }

    static A: Batch = Batch { send: never };
    static B: Batch = Batch { send: never };

    fn due(batch: &'static Batch, key: &str, cluster: bool) -> Due {
        let renewal = Renewal {
            keys: Arc::from([key.to_string()]),
            token: key.into(),
            fence: None,
            written: None,
            ttl_ms: 1000,
        };
        Due { batch, slot: cluster.then(|| Slot::for_key(key)), renewal, answer: oneshot::channel().0 }
    }

    fn tokens(calls: &[Vec<Due>]) -> Vec<Vec<String>> {
        calls.iter().map(|c| c.iter().map(|d| d.renewal.token.to_string()).collect()).collect()
    }

    #[test]
    fn renewals_go_together_by_kind_and_on_a_cluster_by_slot() {
        let one = vec![due(&A, "p{a}", false), due(&B, "p{b}", false), due(&A, "p{c}", false)];
        assert_eq!(tokens(&groups(one)), [vec!["p{a}", "p{c}"], vec!["p{b}"]]);
        let cluster = vec![
            due(&A, "p{a}", true),
            due(&A, "p{b}", true),
            due(&A, "p{a}:rw:r", true),
            due(&B, "p{a}:sem:h", true),
        ];
        assert_eq!(tokens(&groups(cluster)), [vec!["p{a}", "p{a}:rw:r"], vec!["p{b}"], vec!["p{a}:sem:h"]]);
    }

    #[test]
    fn a_call_carries_at_most_most() {
        let group: Vec<Due> = (0..=2 * MOST).map(|i| due(&A, &format!("p{{{i}}}"), false)).collect();
        let sizes: Vec<usize> = chunks(group).iter().map(Vec::len).collect();
        assert_eq!(sizes, [MOST, MOST, 1]);
        assert_eq!(chunks(vec![due(&A, "p{a}", false)]).len(), 1);
    }
}
