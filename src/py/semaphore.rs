//! `Client.semaphore`: a permit handle is a `ferrolock.Lock` over the core's
//! `Permit` mode.

use pyo3::prelude::*;
use pyo3::types::PyDict;

use super::args;
use super::client::PyClient;
use super::lock::PyLock;
use super::options::{keywords, HandleOptions, Kind};

#[doc = concat!("_semaphore(client, name, permits, *", keywords!(lock), ")\n--\n")]
/// A handle on one permit of the semaphore ``name`` (see ``Client.semaphore``).
#[pyfunction]
#[pyo3(signature = (client, name, permits, **options), text_signature = None)]
pub(crate) fn _semaphore(
    client: &Bound<'_, PyClient>,
    name: &Bound<'_, PyAny>,
    permits: &Bound<'_, PyAny>,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<PyLock> {
    let permits = crate::handle::semaphore::permit_count(args::int("permits", permits)?)?;
    let o = HandleOptions::from_kwargs("Client.semaphore()", Kind::Lock, None, options)?;
    let core = crate::handle::semaphore::permit(
        client.get().core.clone(),
        args::name(name)?,
        permits,
        o.lock,
        o.token,
    )?;
    Ok(PyLock::from_core(core, client, o.blocking_timeout))
}
