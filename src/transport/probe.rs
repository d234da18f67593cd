//! Short probes of a server that a connect failed on, telling a wrong
//! setting (TLS or not, a password it has not) from an outage.

use std::time::Duration;

/// What Redis says of a user name or password it does not accept.
pub(crate) const CREDENTIALS_REFUSED: &str = "refused the credentials";

/// PING over a fresh connection made with `info`; `None` when it took longer than `limit`.
pub(crate) async fn ping_probe(
    info: redis::ConnectionInfo,
    limit: Duration,
) -> Option<redis::RedisResult<String>> {
    let probe = async {
        let client = redis::Client::open(info)?;
        let mut conn = client.get_multiplexed_async_connection().await?;
        redis::cmd("PING").query_async::<String>(&mut conn).await
    };
    tokio::time::timeout(limit, probe).await.ok()
}
