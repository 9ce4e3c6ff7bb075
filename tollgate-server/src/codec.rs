//! The gRPC codec: prost (tonic-prost), except that a request the server cannot decode
//! (a truncated message, a string field that is not UTF-8) is answered with
//! INVALID_ARGUMENT, the caller's fault, rather than tonic-prost's INTERNAL.

use std::marker::PhantomData;
use tonic::codec::{Codec, DecodeBuf, Decoder};
use tonic::Status;
use tonic_prost::ProstCodec;

/// [`ProstCodec`] with decode errors mapped to INVALID_ARGUMENT.
#[derive(Debug)]
pub struct RlsCodec<T, U>(ProstCodec<T, U>);

impl<T, U> Default for RlsCodec<T, U> {
    fn default() -> Self {
        RlsCodec(ProstCodec::default())
    }
}

/// Decodes a prost message; a malformed one is INVALID_ARGUMENT.
#[derive(Debug)]
pub struct RlsDecoder<U>(PhantomData<U>);

impl<U: prost::Message + Default> Decoder for RlsDecoder<U> {
    type Item = U;
    type Error = Status;

    fn decode(&mut self, buf: &mut DecodeBuf<'_>) -> Result<Option<U>, Status> {
        U::decode(buf)
            .map(Some)
            .map_err(|e| Status::invalid_argument(format!("malformed request: {e}")))
    }
}

impl<T, U> Codec for RlsCodec<T, U>
where
    T: prost::Message + Send + 'static,
    U: prost::Message + Default + Send + 'static,
{
    type Encode = T;
    type Decode = U;
    type Encoder = <ProstCodec<T, U> as Codec>::Encoder;
    type Decoder = RlsDecoder<U>;

    fn encoder(&mut self) -> Self::Encoder {
        self.0.encoder()
    }

    fn decoder(&mut self) -> Self::Decoder {
        RlsDecoder(PhantomData)
    }
}
