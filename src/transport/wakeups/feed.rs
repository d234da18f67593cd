//! A subscription connection: plain pub/sub on one node, sharded pub/sub on a Cluster.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use futures_util::stream::BoxStream;
use futures_util::StreamExt;
use redis::aio::{PubSub, PubSubSink};
use redis::cluster_async::ClusterConnection;
use redis::{PushInfo, PushKind};
use tokio::sync::mpsc::UnboundedReceiver;

/// A subscription connection: where to (un)subscribe, and what arrives.
pub(crate) struct Feed {
    pub(super) sink: Sink,
    /// (channel, payload) of each message; ends when the connection drops.
    pub(super) messages: BoxStream<'static, (String, String)>,
}

pub(super) enum Sink {
    /// SUBSCRIBE on one node.
    Plain(PubSubSink),
    /// SSUBSCRIBE on a Cluster: each channel on the node owning its slot;
    /// with the channels being left on purpose (their SUNSUBSCRIBE is ours).
    Sharded(ClusterConnection, Arc<Mutex<HashSet<String>>>),
}

impl Feed {
    pub(crate) fn plain(pubsub: PubSub) -> Feed {
        let (sink, stream) = pubsub.split();
        let messages =
            stream.map(|m| (m.get_channel_name().to_string(), m.get_payload().unwrap_or_default()));
        Feed { sink: Sink::Plain(sink), messages: messages.boxed() }
    }

    /// A Cluster connection's pushes: sharded messages, until it reports a
    /// disconnection, or the server drops a subscription we did not leave
    /// (its slot moved to another node). A message may have been lost then:
    /// the feed ends, so every waiter retries and a new feed is made, which
    /// subscribes each channel on the node that owns it now.
    pub(crate) fn sharded(conn: ClusterConnection, pushes: UnboundedReceiver<PushInfo>) -> Feed {
        let leaving: Arc<Mutex<HashSet<String>>> = Arc::default();
        let ours = leaving.clone();
        let messages = futures_util::stream::unfold(pushes, move |mut pushes| {
            let leaving = ours.clone();
            async move {
                let text = |v: &redis::Value| redis::from_redis_value_ref::<String>(v).unwrap_or_default();
                loop {
                    let push = pushes.recv().await?;
                    let message = match (&push.kind, push.data.as_slice()) {
                        (PushKind::SMessage, [channel, payload]) => Some((text(channel), text(payload))),
                        (PushKind::SUnsubscribe, [channel, ..]) => {
                            let channel = text(channel);
                            if !leaving.lock().unwrap().remove(&channel) {
                                log::info!(
                                    "the server dropped the subscription to {channel}; subscribing anew"
                                );
                                return None;
                            }
                            None
                        }
                        (PushKind::Disconnection, _) => return None,
                        _ => None, // subscription confirmations
                    };
                    if let Some(message) = message {
                        return Some((message, pushes));
                    }
                }
            }
        });
        Feed { sink: Sink::Sharded(conn, leaving), messages: messages.boxed() }
    }
}

impl Sink {
    pub(super) async fn subscribe(&mut self, channel: &str) -> redis::RedisResult<()> {
        match self {
            Sink::Plain(s) => s.subscribe(channel).await,
            Sink::Sharded(c, _) => c.ssubscribe(channel).await,
        }
    }

    pub(super) async fn unsubscribe(&mut self, channel: &str) -> redis::RedisResult<()> {
        match self {
            Sink::Plain(s) => s.unsubscribe(channel).await,
            Sink::Sharded(c, leaving) => {
                leaving.lock().unwrap().insert(channel.to_string());
                c.sunsubscribe(channel).await
            }
        }
    }
}
