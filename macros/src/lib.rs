//! The `#[transferable]` attribute, re-exported as
//! `gossamer::transferable`: it makes a user type serializable through the
//! serde that gossamer re-exports, and so `gossamer::Transferable`, without
//! the user depending on serde.

use proc_macro::{Delimiter, Group, Ident, Punct, Spacing, Span, TokenStream, TokenTree};

/// Makes a struct or enum [`Transferable`](../gossamer/trait.Transferable.html):
/// derives `Serialize` and `Deserialize` through `gossamer::serde`, so the
/// type may be an argument, a result or a property that crosses processes.
/// Every field must be transferable too (owned data: no reference, no raw
/// pointer, no `fn` pointer). Field attributes of serde (`#[serde(...)]`)
/// work as usual.
///
/// See `gossamer::transferable` for an example.
#[proc_macro_attribute]
pub fn transferable(attr: TokenStream, item: TokenStream) -> TokenStream {
    if let Some(t) = attr.into_iter().next() {
        return error(
            t.span(),
            "`#[gossamer::transferable]` takes no arguments: write serde's own options as `#[serde(...)]` below it",
        );
    }
    let mut out: TokenStream =
        "#[derive(::gossamer::serde::Serialize, ::gossamer::serde::Deserialize)] #[serde(crate = \"::gossamer::serde\")]"
            .parse()
            .expect("the derive attributes parse");
    out.extend(item);
    out
}

/// `compile_error!(msg)` at `span`.
fn error(span: Span, msg: &str) -> TokenStream {
    let mut lit = proc_macro::Literal::string(msg);
    lit.set_span(span);
    let mut bang = Punct::new('!', Spacing::Alone);
    bang.set_span(span);
    let args = TokenStream::from(TokenTree::Literal(lit));
    let mut group = Group::new(Delimiter::Parenthesis, args);
    group.set_span(span);
    let mut semi = Punct::new(';', Spacing::Alone);
    semi.set_span(span);
    [
        TokenTree::Ident(Ident::new("compile_error", span)),
        TokenTree::Punct(bang),
        TokenTree::Group(group),
        TokenTree::Punct(semi),
    ]
    .into_iter()
    .collect()
}
