// A zero-sized `Copy + Send` proof that something happened in this process
// (here: that the library was initialised). A closure capturing it is as
// zero-sized as one capturing nothing, but the proof would be false in the
// trustee's process: the forms that may cross take their code as a `fn`,
// and only a closure that captures nothing coerces to one.
mod library {
    #[derive(Clone, Copy)]
    pub struct Initialised(());

    pub fn init() -> Initialised {
        Initialised(())
    }

    impl Initialised {
        pub fn answer(self) -> u64 {
            42
        }
    }
}

fn main() {
    gossamer::Runtime::builder().workers(2).build().unwrap().block_on(|| {
        let proof = library::init();
        let t = gossamer::entrust_on(1, 0u64);
        t.apply_with(move |c, ()| *c += proof.answer(), ());
        t.apply_with_then(move |c, ()| *c += proof.answer(), (), |()| ());
    });
}
