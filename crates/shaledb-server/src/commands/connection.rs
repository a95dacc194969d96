//! Connection commands: PING, ECHO, QUIT, RESET, HELLO, AUTH, SELECT, CLIENT, COMMAND.

use super::{
    bulk_or_nil, command_index, is, parse_int, syntax_error, wrong_arity, CommandSpec, Ctx,
    KeySpec, Outcome, Session, Shared, COMMANDS, REDIS_VERSION,
};
use crate::resp::Reply;
use bytes::Bytes;

pub(super) fn ping(_: &mut Ctx, args: &[Bytes]) -> Outcome {
    match args.len() {
        1 => Ok(Reply::Status("PONG")),
        2 => Ok(Reply::Bulk(args[1].clone())),
        _ => Err(wrong_arity("ping")),
    }
}

pub(super) fn echo(_: &mut Ctx, args: &[Bytes]) -> Outcome {
    Ok(Reply::Bulk(args[1].clone()))
}

pub(super) fn quit(ctx: &mut Ctx, _: &[Bytes]) -> Outcome {
    ctx.session.closing = true;
    Ok(Reply::OK)
}

/// RESET: back to a new connection's state (authentication kept only without a password).
pub(super) fn reset(ctx: &mut Ctx, _: &[Bytes]) -> Outcome {
    let fresh = ctx.shared.new_session();
    let old = std::mem::replace(ctx.session, fresh);
    ctx.session.id = old.id;
    Ok(Reply::Status("RESET"))
}

fn check_password(shared: &Shared, user: &[u8], password: &[u8]) -> Result<(), Reply> {
    let Some(expected) = &shared.config.password else {
        return Err(Reply::error(
            "ERR AUTH <password> called without any password configured for the default user. \
             Are you sure your configuration is correct?",
        ));
    };
    if user == b"default" && password == expected.as_bytes() {
        Ok(())
    } else {
        Err(Reply::error(
            "WRONGPASS invalid username-password pair or user is disabled.",
        ))
    }
}

pub(super) fn auth(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    let (shared, session) = (ctx.shared, &mut *ctx.session);
    let (user, password) = match args.len() {
        2 => (&b"default"[..], &args[1][..]),
        3 => (&args[1][..], &args[2][..]),
        _ => return Err(syntax_error()),
    };
    check_password(shared, user, password)?;
    session.authenticated = true;
    Ok(Reply::OK)
}

pub(super) fn hello(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    let (shared, session) = (ctx.shared, &mut *ctx.session);
    let mut protocol = session.protocol;
    let mut rest = &args[1..];
    if let Some(version) = rest.first() {
        protocol = match parse_int(version) {
            Ok(2) => 2,
            Ok(3) => 3,
            Ok(_) => return Err(Reply::error("NOPROTO unsupported protocol version")),
            Err(_) => {
                return Err(Reply::error(
                    "ERR Protocol version is not an integer or out of range",
                ))
            }
        };
        rest = &rest[1..];
    }
    let mut name = None;
    while let Some(option) = rest.first() {
        if is(option, "AUTH") && rest.len() >= 3 {
            check_password(shared, &rest[1], &rest[2])?;
            session.authenticated = true;
            rest = &rest[3..];
        } else if is(option, "SETNAME") && rest.len() >= 2 {
            name = Some(rest[1].clone());
            rest = &rest[2..];
        } else {
            return Err(Reply::error(format!(
                "ERR Syntax error in HELLO option '{}'",
                String::from_utf8_lossy(option)
            )));
        }
    }
    if !session.authenticated {
        return Err(Reply::error(
            "NOAUTH HELLO must be called with the client already authenticated, otherwise the \
             HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and \
             select the RESP protocol version at the same time",
        ));
    }
    if let Some(name) = name {
        set_client_name(session, name)?;
    }
    session.protocol = protocol;
    let text = |value: &str| Reply::text(value);
    Ok(Reply::Map(vec![
        (text("server"), text("shaledb")),
        (text("version"), text(REDIS_VERSION)),
        (text("shaledb_version"), text(env!("CARGO_PKG_VERSION"))),
        (text("proto"), Reply::Integer(i64::from(protocol))),
        (text("id"), Reply::Integer(session.id as i64)),
        (text("mode"), text("standalone")),
        (text("role"), text("master")),
        (text("modules"), Reply::Array(Vec::new())),
    ]))
}

pub(super) fn select(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    let (shared, session) = (ctx.shared, &mut *ctx.session);
    let index = parse_int(&args[1])?;
    if index < 0 || index as usize >= shared.keyspaces.len() {
        return Err(Reply::error("ERR DB index is out of range"));
    }
    session.db = index as usize;
    Ok(Reply::OK)
}

fn set_client_name(session: &mut Session, name: Bytes) -> Result<(), Reply> {
    if name.iter().any(|&b| !(b'!'..=b'~').contains(&b)) {
        return Err(Reply::error(
            "ERR Client names cannot contain spaces, newlines or special characters.",
        ));
    }
    session.name = (!name.is_empty()).then_some(name);
    Ok(())
}

pub(super) fn client(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    let session = &mut *ctx.session;
    let sub = &args[1];
    if is(sub, "ID") && args.len() == 2 {
        Ok(Reply::Integer(session.id as i64))
    } else if is(sub, "SETNAME") && args.len() == 3 {
        set_client_name(session, args[2].clone())?;
        Ok(Reply::OK)
    } else if is(sub, "GETNAME") && args.len() == 2 {
        Ok(bulk_or_nil(session.name.clone()))
    } else if is(sub, "SETINFO") && args.len() == 4 {
        let value = String::from_utf8_lossy(&args[3]).into_owned();
        if is(&args[2], "LIB-NAME") {
            session.library = Some(value);
        } else if !is(&args[2], "LIB-VER") {
            return Err(Reply::error(format!(
                "ERR Unrecognized option '{}'",
                String::from_utf8_lossy(&args[2])
            )));
        }
        Ok(Reply::OK)
    } else {
        Err(Reply::error(format!(
            "ERR unknown subcommand or wrong number of arguments for '{}'. Try CLIENT HELP.",
            String::from_utf8_lossy(sub)
        )))
    }
}

fn command_entry(command: &CommandSpec) -> Reply {
    let (first, last, step) = match command.keys {
        KeySpec::Range(first, last, step) => (first, last, step),
        KeySpec::NumKeys { .. } | KeySpec::None | KeySpec::All => (0, 0, 0),
    };
    Reply::Array(vec![
        Reply::text(command.name.to_ascii_lowercase()),
        Reply::Integer(i64::from(command.arity)),
        Reply::Array(
            command
                .flags
                .iter()
                .map(|flag| Reply::Status(flag))
                .collect(),
        ),
        Reply::Integer(i64::from(first)),
        Reply::Integer(i64::from(last)),
        Reply::Integer(i64::from(step)),
    ])
}

pub(super) fn command_info(_ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    let Some(sub) = args.get(1) else {
        return Ok(Reply::Array(COMMANDS.iter().map(command_entry).collect()));
    };
    let find = |name: &Bytes| command_index(name).map(|index| &COMMANDS[index]);
    if is(sub, "COUNT") {
        Ok(Reply::Integer(COMMANDS.len() as i64))
    } else if is(sub, "INFO") {
        Ok(Reply::Array(
            args[2..]
                .iter()
                .map(|name| find(name).map_or(Reply::NilArray, command_entry))
                .collect(),
        ))
    } else if is(sub, "DOCS") {
        // Clients only need the names to exist; the documentation lives in docs/SERVER.md.
        let names: Vec<&CommandSpec> = if args.len() > 2 {
            args[2..].iter().filter_map(find).collect()
        } else {
            COMMANDS.iter().collect()
        };
        Ok(Reply::Map(
            names
                .into_iter()
                .map(|command| {
                    (
                        Reply::text(command.name.to_ascii_lowercase()),
                        Reply::Map(vec![(Reply::text("summary"), Reply::text(""))]),
                    )
                })
                .collect(),
        ))
    } else if is(sub, "LIST") {
        Ok(Reply::Array(
            COMMANDS
                .iter()
                .map(|command| Reply::text(command.name.to_ascii_lowercase()))
                .collect(),
        ))
    } else {
        Err(Reply::error(format!(
            "ERR unknown subcommand '{}'. Try COMMAND HELP.",
            String::from_utf8_lossy(sub)
        )))
    }
}
