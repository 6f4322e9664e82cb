//! The upload server: HTTPS with its pod's certificate, admitting only clients whose certificate
//! the client CA signed for the client name (cdi-uploadproxy's), and taking one upload into the
//! claim with the importer's pipeline ([`cdi_importer::import`]). It ends once the disk is
//! written, or at its deadline when no upload is under way, as upstream's does.

use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use cdi_api::upload;
use cdi_importer::body_pipe::{self as body, ChannelReader};
use cdi_importer::convert::Converter;
use cdi_importer::import::{self, ImportError, Request as ImportRequest};
use cdi_importer::layers::Stream;
use cdi_importer::run::{self, RunError};
use cdi_importer::sparse_copy::CopyError;
use control_loop::https_connection::{self, Peer};
use control_loop::tls::{CertSource, ClientCa, ClientPolicy, Identities, TlsError};
use http_body_util::Full;
use hyper::{Request, Response, StatusCode};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_util::task::TaskTracker;
use tracing::{debug, info, warn};

use crate::config::Config;
use crate::form::FormFile;
use crate::routes::{self, Body, Mode, Route};
use crate::session::{self, Event, State, Step};

/// How long the last answers may take to be sent once the server is over.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(30);

/// How the server ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The disk is written.
    Uploaded {
        /// Whether its space was allocated up front.
        preallocation_applied: bool,
    },
    /// The deadline passed with no upload done.
    DeadlinePassed,
}

/// Why the server could not run, or failed.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// Its certificates.
    #[error(transparent)]
    Tls(#[from] TlsError),
    /// Its address.
    #[error("listening on {address}: {source}")]
    Bind {
        /// The address.
        address: SocketAddr,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// An async upload failed after the client was answered.
    #[error("the upload failed after it was received: {0}")]
    Failed(String),
}

/// Why an upload was not written.
#[derive(Debug, thiserror::Error)]
enum WriteError {
    /// The multipart form.
    #[error("reading the form: {0}")]
    Form(io::Error),
    /// The import.
    #[error(transparent)]
    Import(#[from] ImportError),
    /// Finishing the disk.
    #[error(transparent)]
    Finish(#[from] RunError),
    /// The writing thread.
    #[error("the upload stopped: {0}")]
    Stopped(String),
}

impl WriteError {
    fn is_too_large(&self) -> bool {
        matches!(
            self,
            Self::Import(
                ImportError::TooLarge(_)
                    | ImportError::Copy {
                        source: CopyError::TooLarge { .. },
                        ..
                    }
            )
        )
    }

    /// Upstream's answer: 400 for an image too large or a bad form, else 500.
    fn answer(&self) -> Response<Full<Bytes>> {
        if self.is_too_large() {
            let message = format!(
                "Saving stream failed: effective image size is larger than the reported available storage: {self}"
            );
            reply(StatusCode::BAD_REQUEST, message)
        } else if matches!(self, Self::Form(_)) {
            reply(StatusCode::BAD_REQUEST, format!("Saving stream failed: {self}"))
        } else {
            reply(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("Saving stream failed: {self}"),
            )
        }
    }
}

fn reply(status: StatusCode, body: impl Into<Bytes>) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(body.into()));
    *response.status_mut() = status;
    response
}

/// What the connections share.
struct Shared {
    config: Config,
    converter: Arc<dyn Converter + Send + Sync>,
    state: watch::Sender<State>,
    failure: Mutex<Option<String>>,
}

impl Shared {
    fn apply(&self, event: Event) -> Step {
        let mut taken = Step::Impossible;
        self.state.send_if_modified(|state| {
            taken = session::step(*state, event);
            match taken {
                Step::To(next) => {
                    *state = next;
                    true
                }
                Step::Refuse(_) | Step::Impossible => false,
            }
        });
        if taken == Step::Impossible {
            warn!(?event, state = ?*self.state.borrow(), "an upload event out of order");
        }
        taken
    }

    /// Writes the upload read from `reader` (a form's `file` part with `boundary`; a disk's bytes
    /// as they are when `verbatim`).
    fn write(&self, reader: ChannelReader, boundary: Option<&str>, verbatim: bool) -> Result<(), WriteError> {
        let stream: Stream = match boundary {
            Some(boundary) => Box::new(FormFile::open(reader, boundary).map_err(WriteError::Form)?),
            None => Box::new(reader),
        };
        let config = &self.config;
        let request = ImportRequest {
            requested_size: config.image_size,
            filesystem_overhead: config.filesystem_overhead.clone(),
            scratch: config.scratch_dir.is_dir().then(|| config.scratch_dir.clone()),
            verbatim,
        };
        let outcome = import::import(stream, &config.target, &request, self.converter.as_ref())?;
        info!(format = ?outcome.format, compression = ?outcome.compression, virtual_size = outcome.virtual_size, resized_to = ?outcome.resized_to, "uploaded");
        run::complete(&config.target, outcome.virtual_size, config.preallocation)?;
        Ok(())
    }

    /// Records how a write ended; `answered` when the client already has its answer.
    fn settle(&self, written: &Result<(), WriteError>, answered: bool) {
        match written {
            Ok(()) => {
                info!(target = %self.config.target.path().display(), "wrote the upload");
                self.apply(Event::Finished);
            }
            Err(error) => {
                warn!(error = %error, "saving the upload failed");
                if answered && let Ok(mut failure) = self.failure.lock() {
                    *failure = Some(error.to_string());
                }
                self.apply(Event::Failed);
            }
        }
    }
}

/// The upload server, listening.
#[expect(
    missing_debug_implementations,
    reason = "its parts (the TLS acceptor, the converter) have no Debug"
)]
pub struct Server {
    listener: TcpListener,
    acceptor: tokio_rustls::TlsAcceptor,
    shared: Arc<Shared>,
}

impl Server {
    /// Listens as `config` says, converting with `converter`.
    ///
    /// # Errors
    /// [`ServeError::Tls`] naming the certificate file, [`ServeError::Bind`].
    pub async fn bind(config: Config, converter: Arc<dyn Converter + Send + Sync>) -> Result<Self, ServeError> {
        let policy = ClientPolicy {
            ca: ClientCa::File(config.client_ca_file.clone()),
            identities: Identities::Only(vec![config.client_name.clone()]),
            // Upstream's: a client without a certificate is answered 401, not cut off.
            required: false,
        };
        let source = CertSource::Files {
            cert: config.cert_file.clone(),
            key: config.key_file.clone(),
        };
        let tls = control_loop::tls::server_tls_for(&source, Some(&policy))?;
        let address = SocketAddr::new(config.address, config.port);
        let listener = TcpListener::bind(address)
            .await
            .map_err(|source| ServeError::Bind { address, source })?;
        Ok(Self {
            listener,
            acceptor: tokio_rustls::TlsAcceptor::from(tls.config),
            shared: Arc::new(Shared {
                config,
                converter,
                state: watch::Sender::new(State::Waiting),
                failure: Mutex::new(None),
            }),
        })
    }

    /// The address it listens on.
    ///
    /// # Errors
    /// The socket's.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until the upload is done, or the deadline passes with none under way.
    ///
    /// # Errors
    /// [`ServeError::Failed`]: an async upload failed after its answer.
    pub async fn run(self) -> Result<Outcome, ServeError> {
        let Self {
            listener,
            acceptor,
            shared,
        } = self;
        let mut state = shared.state.subscribe();
        let connections = TaskTracker::new();
        let deadline = shared.config.deadline.map(|at| {
            let now = time::OffsetDateTime::now_utc().unix_timestamp();
            Duration::from_secs(u64::try_from(at - now).unwrap_or(0))
        });
        let deadline = async move {
            match deadline {
                Some(wait) => tokio::time::sleep(wait).await,
                None => std::future::pending().await,
            }
        };
        tokio::pin!(deadline);
        let mut deadline_passed = false;
        loop {
            let now = *state.borrow_and_update();
            if session::is_over(now) || (deadline_passed && !session::is_busy(now)) {
                break;
            }
            tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok((stream, peer)) => {
                        let shared = Arc::clone(&shared);
                        let handler = move |request, peer: Peer| handle(Arc::clone(&shared), request, peer.certificate);
                        // One request a connection: the server's end waits for the last answer.
                        connections.spawn(https_connection::serve(stream, peer, acceptor.clone(), false, handler));
                    }
                    Err(error) => debug!(error = %error, "accept failed"),
                },
                _ = state.changed() => {}
                () = &mut deadline, if !deadline_passed => {
                    info!("the deadline passed");
                    deadline_passed = true;
                }
            }
        }
        drop(listener);
        connections.close();
        if tokio::time::timeout(DRAIN_TIMEOUT, connections.wait()).await.is_err() {
            warn!("connections still open at the end");
        }
        match *state.borrow() {
            State::Done => Ok(Outcome::Uploaded {
                preallocation_applied: shared.config.preallocation,
            }),
            State::Failed => {
                let failure = shared.failure.lock().ok().and_then(|f| f.clone()).unwrap_or_default();
                Err(ServeError::Failed(failure))
            }
            State::Waiting | State::Receiving | State::Finishing => Ok(Outcome::DeadlinePassed),
        }
    }
}

async fn handle(shared: Arc<Shared>, request: Request<hyper::body::Incoming>, verified: bool) -> Response<Full<Bytes>> {
    let route = routes::route(request.method().as_str(), request.uri().path());
    if matches!(route, Route::Upload(..) | Route::Archive) && !verified {
        return reply(StatusCode::UNAUTHORIZED, "");
    }
    let (mode, body_kind) = match route {
        Route::Healthz => return reply(StatusCode::OK, "OK"),
        Route::AsyncProbe => return reply(StatusCode::OK, ""),
        Route::NotFound => return reply(StatusCode::NOT_FOUND, ""),
        Route::Archive => {
            return reply(
                StatusCode::BAD_REQUEST,
                "archive uploads are not supported by this upload server",
            );
        }
        Route::Upload(mode, body_kind) => (mode, body_kind),
    };
    let header = |name: &str| {
        request
            .headers()
            .get(name)
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
    };
    // A clone's source pod sends the source disk's bytes as they are (upstream's
    // `blockdevice-clone`); upstream's tar of a filesystem source is not taken.
    let verbatim = match header(upload::CONTENT_TYPE_HEADER).filter(|v| !v.is_empty()) {
        None => false,
        Some(content_type) if content_type == cdi_api::clone::BLOCK_CONTENT && body_kind == Body::Raw => true,
        Some(content_type) => {
            return reply(
                StatusCode::BAD_REQUEST,
                format!(
                    "{}: {content_type:?} is not taken by this upload server",
                    upload::CONTENT_TYPE_HEADER
                ),
            );
        }
    };
    let boundary = match body_kind {
        Body::Raw => None,
        Body::Form => match header(hyper::header::CONTENT_TYPE.as_str())
            .as_deref()
            .and_then(routes::form_boundary)
        {
            Some(boundary) => Some(boundary),
            None => return reply(StatusCode::BAD_REQUEST, "the form has no multipart/form-data boundary"),
        },
    };
    match shared.apply(Event::Arrived) {
        Step::To(_) => {}
        Step::Refuse(refusal) => {
            warn!(?refusal, "an upload refused");
            return reply(
                StatusCode::from_u16(refusal.status()).unwrap_or(StatusCode::CONFLICT),
                "",
            );
        }
        Step::Impossible => return reply(StatusCode::INTERNAL_SERVER_ERROR, ""),
    }
    info!(?mode, ?body_kind, "receiving an upload");
    let (sender, reader, received) = body::channel();
    tokio::spawn(body::forward(request.into_body(), sender, |error| {
        io::Error::new(io::ErrorKind::UnexpectedEof, format!("reading the upload: {error}"))
    }));
    // The upload is carried out and recorded by a task of its own: a client that hangs up drops
    // this handler, never the record of what became of its upload.
    let (answered, answer) = tokio::sync::oneshot::channel();
    tokio::spawn(carry_out(
        shared,
        mode,
        reader,
        (boundary, verbatim),
        received,
        answered,
    ));
    answer
        .await
        .unwrap_or_else(|_| reply(StatusCode::INTERNAL_SERVER_ERROR, "the upload stopped"))
}

/// Writes the upload read from `reader`, answers through `answered` (an async upload once its
/// body is all read, a sync one once the disk is written), and records the outcome.
async fn carry_out(
    shared: Arc<Shared>,
    mode: Mode,
    reader: ChannelReader,
    (boundary, verbatim): (Option<String>, bool),
    mut received: tokio::sync::oneshot::Receiver<()>,
    answered: tokio::sync::oneshot::Sender<Response<Full<Bytes>>>,
) {
    let writer = Arc::clone(&shared);
    let mut work = tokio::task::spawn_blocking(move || writer.write(reader, boundary.as_deref(), verbatim));
    let joined = |joined: Result<Result<(), WriteError>, tokio::task::JoinError>| {
        joined.unwrap_or_else(|e| Err(WriteError::Stopped(e.to_string())))
    };
    if mode == Mode::Async {
        tokio::select! {
            // A write that ended (failed) as the body ended is answered with its outcome.
            biased;
            written = &mut work => {
                let written = joined(written);
                shared.settle(&written, false);
                let _ = answered.send(answer(&written));
                return;
            }
            Ok(()) = &mut received => {}
        }
        // Everything is read: answer now and finish the disk after.
        shared.apply(Event::Received);
        info!("the upload is in; finishing the disk after the answer");
        let _ = answered.send(reply(StatusCode::OK, ""));
        let written = joined(work.await);
        shared.settle(&written, true);
        return;
    }
    let written = joined(work.await);
    shared.settle(&written, false);
    let _ = answered.send(answer(&written));
}

fn answer(written: &Result<(), WriteError>) -> Response<Full<Bytes>> {
    match written {
        Ok(()) => reply(StatusCode::OK, ""),
        Err(error) => error.answer(),
    }
}
