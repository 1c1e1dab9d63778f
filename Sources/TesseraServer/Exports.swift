// The JSON values and event objects the daemon's API is written in (RPCValue, EventJSON) live in
// TesseraEvents, which the `tessera` command uses without the daemon; users of TesseraServer
// see them as before.
@_exported import TesseraEvents
