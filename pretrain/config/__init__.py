from pretrain.config.loader import load_data_config, load_train_config  # noqa: F401
from pretrain.config.schema import TrainConfig  # noqa: F401
