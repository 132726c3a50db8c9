//! Thin gRPC handlers, one file per gRPC service: decode, call the
//! application layer, encode.

pub mod audit;
pub mod cluster_actions;
pub mod cluster_convert;
pub mod cluster_lifecycle_callback;
pub mod clusters;
pub mod convert;
pub mod events;
pub mod identity;
pub mod instances;
pub mod maintenance;
pub mod nodes;
pub mod policies;
pub mod profiles;
pub mod quotas;
pub mod receiver_queue;
pub mod receivers;
pub mod resources;
pub mod software;
pub mod stacks;

use std::future::Future;

use ember_runtime::Identity;
use tonic::{Request, Response, Status};

use crate::error::Error;

/// What a handler answers.
pub(crate) type Reply<T> = Result<Response<T>, Status>;

/// The shape most handlers share: the caller's identity and the request's
/// message go to `call` (which decodes and calls the application layer);
/// its result is encoded by `encode`, an error becomes its status — as is
/// a reply larger than callers read
/// ([`ember_runtime::server::MAX_MESSAGE_BYTES`]).
pub(crate) async fn answer<Message, Answer, Encoded, Call>(
    request: Request<Message>,
    call: impl FnOnce(Identity, Message) -> Call,
    encode: impl FnOnce(Answer) -> Encoded,
) -> Reply<Encoded>
where
    Call: Future<Output = Result<Answer, Error>>,
    Encoded: prost::Message,
{
    let caller = Identity::of(&request)?.clone();
    let answer = call(caller, request.into_inner()).await?;
    let what = std::any::type_name::<Encoded>()
        .rsplit("::")
        .next()
        .unwrap_or("the reply");
    let reply = ember_runtime::server::bounded_reply(encode(answer), what)?;
    Ok(Response::new(reply))
}
