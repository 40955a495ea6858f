//! One walk over a connection, whichever way it reads: a page per request (`paging`) or
//! aliased page batches (`batched`). The Python paginator holds a `Walk` and does not ask which.

use std::sync::Arc;

use super::batched::BatchStream;
use super::error::Result;
use super::paging::{PageStream, RawPage};
use super::transport::Transport;

pub(crate) enum Walk {
    Pages(PageStream),
    Batches(BatchStream),
}

impl Walk {
    /// The next page, or `None` at the end.
    pub(crate) async fn next_page(&mut self) -> Result<Option<RawPage>> {
        match self {
            Self::Pages(s) => s.next_page().await,
            Self::Batches(s) => s.next_page().await,
        }
    }

    /// The next page if no waiting is needed (see `PageStream::try_next_page`).
    pub(crate) fn try_next_page(&mut self) -> Option<Result<Option<RawPage>>> {
        match self {
            Self::Pages(s) => s.try_next_page(),
            Self::Batches(s) => s.try_next_page(),
        }
    }

    /// The cursor to resume after the last page given (a batched walk's is its own, and resumes
    /// only a batched walk).
    pub(crate) fn cursor(&self) -> Option<&str> {
        match self {
            Self::Pages(s) => s.cursor(),
            Self::Batches(s) => s.cursor(),
        }
    }

    /// The node's type and selection, for a catalog operation.
    pub(crate) fn node(&self) -> Option<(&str, &str)> {
        match self {
            Self::Pages(s) => s.node(),
            Self::Batches(s) => Some(s.node()),
        }
    }

    /// The connection's count of its items, when the walk learnt it.
    pub(crate) fn total(&self) -> Option<u64> {
        match self {
            Self::Pages(s) => s.total(),
            Self::Batches(_) => None,
        }
    }

    /// The client's transport (for its counters).
    pub(crate) fn transport(&self) -> &Arc<Transport> {
        match self {
            Self::Pages(s) => s.transport(),
            Self::Batches(s) => s.transport(),
        }
    }
}

impl From<PageStream> for Walk {
    fn from(s: PageStream) -> Self {
        Self::Pages(s)
    }
}

impl From<BatchStream> for Walk {
    fn from(s: BatchStream) -> Self {
        Self::Batches(s)
    }
}
