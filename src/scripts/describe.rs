//! The operator's steps over every part of one name, every kind alike:
//! `describe.lua` reads it, `force_release.lua` ends its holds. Each key's
//! kind and role come from the key layout table; `listing.rs` parses the
//! answers.

use crate::error::Result;
use crate::transport::backend::Backend;

use super::{run, step, Argv, Lua};

step! {
    DESCRIBE = "describe.lua",
    struct DescribeArgv<'a> {
        roles: &'a [String],
    }
}

step! {
    FORCE_RELEASE = "force_release.lua",
    struct ForceReleaseArgv<'a> {
        roles: &'a [String],
        token: &'a str,
    }
}

/// The steps of this module, for `crate::primitive::every_step`.
pub(crate) static STEPS: [&Lua; 2] = [&DESCRIBE, &FORCE_RELEASE];

/// `describe.lua`, or with `token` `force_release.lua` ('' = every hold),
/// over every part of one name: `keys` with `roles` ('<kind> <role>' each,
/// from the layout table).
pub(crate) async fn by_parts<T: redis::FromRedisValue>(
    client: &Backend,
    keys: &[String],
    roles: &[String],
    token: Option<&str>,
) -> Result<T> {
    let mut invocation = match token {
        Some(token) => ForceReleaseArgv { roles, token }.on(client),
        None => DescribeArgv { roles }.on(client),
    };
    run(client, invocation.key(keys)).await
}
