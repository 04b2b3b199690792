from pretrain.config.schema import TrainConfig  # noqa: F401
from pretrain.config.loader import load_train_config, load_data_config  # noqa: F401
